"""SM targets: every GPU name ptxas knows from sm_70 to sm_121, with tiers and features.

A *target* is what a PTX ``.target`` line names (``sm_90a``), and equally the GPU name ptxas
compiles for (``-arch``).  Three kinds exist (ptxas --help, "--gpu-name"); PTX written for

* plain ``sm_XY`` compiles for every GPU ``sm_MN`` (any suffix) with MN >= XY;
* family ``sm_XYf`` (CUDA 12.9+) compiles for ``sm_XZ``/``sm_XZa``/``sm_XZf`` with the same
  major X and Z >= Y;
* architecture-specific ``sm_XYa`` compiles for ``sm_XYa`` only.

That is :meth:`Target.runs_on`.  It is a property of the PTX: a *cubin* built for sm_80 does
not load on an sm_90 GPU (CUDA_ERROR_NO_BINARY_FOR_GPU, seen on an H200); assemble the sm_80
PTX for sm_90 instead.

Each target belongs to one tier of the specification's roster (SM70/75, SM80, SM89, SM90,
SM100/SM103, SM110, SM120/SM121) and has a minimum PTX ISA version.  Features (ldmatrix,
cp.async, wgmma, tcgen05, block-scaled mma, ...) are declared once in :data:`FEATURES` as a
rule over (compute capability, suffix); every rule was read off ptxas 13.0 (12.9 for sm_70/72)
and the test suite re-checks each one by assembling a probe on every target.

This module imports only ``nvatom.errors``.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Iterable

from nvatom.errors import TargetError, lookup

__all__ = [
    "FEATURES",
    "MAX_CTA_THREADS",
    "MAX_THREAD_REGISTERS",
    "TARGETS",
    "Feature",
    "PtxVersion",
    "Target",
    "Tier",
    "device_target",
    "feature",
    "target",
    "targets_with",
]

PtxVersion = tuple[int, int]


class Tier(enum.IntEnum):
    """The specification's SM tier roster (docs/spec-deviations.md#tier-roster), oldest first."""

    SM70 = 70
    SM75 = 75
    SM80 = 80
    SM89 = 89
    SM90 = 90
    SM100 = 100  # SM100 and SM103 (datacenter Blackwell)
    SM110 = 110  # Jetson Thor
    SM120 = 120  # SM120 and SM121 (consumer Blackwell)

    @property
    def label(self) -> str:
        return _TIER_LABELS[self]


_TIER_LABELS = {
    Tier.SM70: "SM70/75",
    Tier.SM75: "SM70/75",
    Tier.SM80: "SM80",
    Tier.SM89: "SM89",
    Tier.SM90: "SM90",
    Tier.SM100: "SM100/SM103",
    Tier.SM110: "SM110",
    Tier.SM120: "SM120/SM121",
}


@dataclasses.dataclass(frozen=True, order=False)
class Target:
    """One GPU target name, e.g. sm_90a."""

    name: str
    major: int
    minor: int
    suffix: str  # "", "a" or "f"
    tier: Tier
    min_ptx: PtxVersion  # lowest PTX ISA .version ptxas accepts for this .target
    ptxas: str  # the CUDA release whose ptxas we assemble it with ("13.0" or "12.9")

    def __post_init__(self) -> None:
        expect = f"sm_{self.major}{self.minor}{self.suffix}"
        if self.name != expect:
            raise TargetError(f"target record '{self.name}' does not match its fields ({expect})")
        if self.suffix not in ("", "a", "f"):
            raise TargetError(f"target '{self.name}': bad suffix '{self.suffix}'")

    @property
    def cc(self) -> int:
        """Compute capability as an integer: 90 for sm_90a, 103 for sm_103f."""
        return self.major * 10 + self.minor

    @property
    def arch_specific(self) -> bool:
        return self.suffix == "a"

    @property
    def family_specific(self) -> bool:
        return self.suffix == "f"

    @property
    def ptx_target(self) -> str:
        """The operand of the PTX ``.target`` directive."""
        return self.name

    @property
    def min_ptx_str(self) -> str:
        return f"{self.min_ptx[0]}.{self.min_ptx[1]}"

    def runs_on(self, gpu: Target | str) -> bool:
        """Can PTX written for this target be compiled for (and so run on) ``gpu``?"""
        g = target(gpu)
        if self.suffix == "a":
            return g.name == self.name
        if self.suffix == "f":
            return g.major == self.major and g.minor >= self.minor
        return g.cc >= self.cc

    def supports(self, feature_name: str) -> bool:
        return feature(feature_name).available_on(self)

    def features(self) -> list[str]:
        return [f.name for f in FEATURES if f.available_on(self)]

    def ptx_version_for(self, *features: str) -> PtxVersion:
        """The lowest .version that this target and all the named features accept."""
        return max([self.min_ptx, *(feature(f).min_ptx for f in features)])

    def __str__(self) -> str:
        return self.name


def _parse_name(name: str) -> tuple[int, int, str]:
    m = re.fullmatch(r"sm_(\d+?)(\d)([af]?)", name)
    if not m:
        raise TargetError(f"'{name}' is not a target name (expected e.g. 'sm_90a')")
    return int(m.group(1)), int(m.group(2)), m.group(3)


def _tier_of(major: int, minor: int) -> Tier:
    cc = major * 10 + minor
    if cc < 75:
        return Tier.SM70
    if cc < 80:
        return Tier.SM75
    if cc < 89:
        return Tier.SM80
    if cc < 90:
        return Tier.SM89
    if major == 9:
        return Tier.SM90
    if major == 10:
        return Tier.SM100
    if major == 11:
        return Tier.SM110
    return Tier.SM120


# name, minimum PTX ISA version (measured: the lowest .version ptxas accepts for a bare
# kernel with this .target), CUDA release whose ptxas assembles it.
_TARGET_TABLE: tuple[tuple[str, PtxVersion, str], ...] = (
    ("sm_70", (6, 0), "12.9"),
    ("sm_72", (6, 1), "12.9"),
    ("sm_75", (6, 3), "13.0"),
    ("sm_80", (7, 0), "13.0"),
    ("sm_86", (7, 1), "13.0"),
    ("sm_87", (7, 4), "13.0"),
    ("sm_88", (7, 3), "13.0"),  # ptxas 13.0 really accepts .version 7.3 here
    ("sm_89", (7, 8), "13.0"),
    ("sm_90", (7, 8), "13.0"),
    ("sm_90a", (8, 0), "13.0"),
    ("sm_100", (8, 6), "13.0"),
    ("sm_100a", (8, 6), "13.0"),
    ("sm_100f", (8, 8), "13.0"),
    ("sm_103", (8, 8), "13.0"),
    ("sm_103a", (8, 8), "13.0"),
    ("sm_103f", (8, 8), "13.0"),
    ("sm_110", (9, 0), "13.0"),
    ("sm_110a", (9, 0), "13.0"),
    ("sm_110f", (9, 0), "13.0"),
    ("sm_120", (8, 7), "13.0"),
    ("sm_120a", (8, 7), "13.0"),
    ("sm_120f", (8, 8), "13.0"),
    ("sm_121", (8, 8), "13.0"),
    ("sm_121a", (8, 8), "13.0"),
    ("sm_121f", (8, 8), "13.0"),
)


def _make_target(name: str, min_ptx: PtxVersion, release: str) -> Target:
    major, minor, suffix = _parse_name(name)
    return Target(name, major, minor, suffix, _tier_of(major, minor), min_ptx, release)


#: The most threads of one CTA on every target here (PTX ISA ".maxntid"/".reqntid": 1024).
MAX_CTA_THREADS = 1024
#: The most 32-bit registers one thread can have on every target here (255, the ceiling of
#: ".maxnreg" and of "setmaxnreg"-free kernels from sm_70 to sm_121).
MAX_THREAD_REGISTERS = 255

TARGETS: dict[str, Target] = {n: _make_target(n, v, r) for n, v, r in _TARGET_TABLE}


def target(name: Target | str) -> Target:
    """Look a target up by name ('sm_90a', also 'sm90a', '90a', 'compute_90a')."""
    if isinstance(name, Target):
        return name
    if not isinstance(name, str):
        raise TargetError(f"expected a target name, got {name!r}")
    key = name.strip().lower()
    key = re.sub(r"^(compute_|sm)", "sm_", key).replace("sm__", "sm_")
    if re.fullmatch(r"\d+[af]?", key):
        key = "sm_" + key
    return lookup(TARGETS, key, lambda: TargetError(
        f"unknown target '{name}'; known targets: {', '.join(TARGETS)}"))


def device_target(compute_capability: str | tuple[int, int]) -> Target:
    """The most specific target a physical GPU of this compute capability runs.

    A GPU reports only its capability ("9.0", "90" or (9, 0)); it runs code for ``sm_XYa`` where
    that target exists (an H100/H200 runs sm_90a code), else for plain ``sm_XY``.
    """
    cc = compute_capability
    if isinstance(cc, tuple):
        major, minor = cc
    else:
        m = re.fullmatch(r"(\d+)\.?(\d)", str(cc).strip())
        if not m:
            raise TargetError(f"'{cc}' is not a compute capability like '9.0' or '90'")
        major, minor = int(m.group(1)), int(m.group(2))
    for name in (f"sm_{major}{minor}a", f"sm_{major}{minor}"):
        if name in TARGETS:
            return TARGETS[name]
    raise TargetError(f"no target for compute capability {major}.{minor}")


# --------------------------------------------------------------------------- features


@dataclasses.dataclass(frozen=True)
class Feature:
    """A PTX capability and the rule saying which targets have it.

    A target has the feature when its compute capability is at least ``min_cc``, its suffix
    is in ``suffixes``, its major version is in ``majors`` (when given), and, when ``only`` is
    given, its name is listed there.
    """

    name: str
    description: str
    min_cc: int
    min_ptx: PtxVersion
    suffixes: frozenset[str] = frozenset({"", "a", "f"})
    majors: frozenset[int] | None = None
    only: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if not self.suffixes <= {"", "a", "f"}:
            raise TargetError(f"feature '{self.name}': bad suffixes {sorted(self.suffixes)}")
        if self.only is not None:
            unknown = self.only - set(TARGETS)
            if unknown:
                raise TargetError(f"feature '{self.name}': unknown targets {sorted(unknown)}")

    def available_on(self, t: Target | str) -> bool:
        t = target(t)
        if self.only is not None and t.name not in self.only:
            return False
        if self.majors is not None and t.major not in self.majors:
            return False
        return t.cc >= self.min_cc and t.suffix in self.suffixes

    @property
    def rule(self) -> str:
        """The rule in words, for `nvatom targets --features`."""
        if self.only is not None:
            return "only " + ", ".join(sorted(self.only, key=lambda n: TARGETS[n].cc))
        parts = [f"sm_{self.min_cc}+"]
        if self.majors is not None:
            parts = ["sm_" + "/".join(f"{m}x" for m in sorted(self.majors))]
        if self.suffixes == frozenset({"a"}):
            parts.append("'a' targets")
        elif self.suffixes == frozenset({"a", "f"}):
            parts.append("'a'/'f' targets")
        return ", ".join(parts)


_ANY_SPECIFIC = frozenset({"a", "f"})

FEATURES: tuple[Feature, ...] = (
    Feature("mma.m8n8k4", "mma.sync m8n8k4 (Volta HMMA)", 70, (6, 4)),
    Feature("ldmatrix", "ldmatrix.sync m8n8 x1/x2/x4", 75, (6, 5)),
    Feature("mma.m16n8k8", "mma.sync m16n8k8 f16", 75, (6, 5)),
    Feature("mma.int.m8n8", "mma.sync m8n8k16/k32 s8/u8/s4/u4", 75, (6, 5)),
    Feature("cp.async", "cp.async (+ commit/wait_group)", 80, (7, 0)),
    Feature("mbarrier", "mbarrier with .shared::cta and .release/.acquire qualifiers", 80,
            (8, 0)),
    Feature("createpolicy", "createpolicy.fractional (L2 cache-eviction policies)", 80, (7, 4)),
    Feature("mma.sm80", "mma.sync m16n8k16 bf16, tf32, f64, int k32/k64", 80, (7, 0)),
    Feature("mma.sp", "structured-sparse mma.sp", 80, (7, 1)),
    Feature("mma.fp8", "mma.sync with e4m3/e5m2 inputs", 89, (8, 4)),
    Feature("mma.f64.m16n8", "mma.sync m16n8k4/k8/k16 with f64", 90, (7, 8)),
    Feature("stmatrix", "stmatrix.sync m8n8", 90, (7, 8)),
    Feature("ldmatrix.b8", "ldmatrix .m16n16 .b8 and the .m8n16/.m16n16 6-/4-bit "
            "decompressing loads", 100, (8, 6), _ANY_SPECIFIC, frozenset({10, 11, 12})),
    Feature("stmatrix.b8", "stmatrix .m16n8 .trans .b8", 100, (8, 6), _ANY_SPECIFIC,
            frozenset({10, 11, 12})),
    Feature("red.vec.f32", "red.global.add.v2/.v4.f32 (vector reductions)", 90, (8, 1)),
    Feature("cluster", "thread-block clusters (barrier.cluster)", 90, (7, 8)),
    Feature("tma", "cp.async.bulk.tensor (TMA) and multicast", 90, (8, 0)),
    Feature("tma.shared_cta", "cp.async.bulk.tensor loads into .shared::cta (no multicast)", 90,
            (8, 6)),
    Feature("mbarrier.tx", "mbarrier expect_tx / complete_tx", 90, (8, 0)),
    Feature("elect.sync", "elect.sync", 90, (8, 0)),
    Feature("wgmma", "wgmma.mma_async (warpgroup MMA)", 90, (8, 0), frozenset({"a"}),
            frozenset({9})),
    Feature("setmaxnreg", "setmaxnreg (warpgroup register reallocation)", 90, (8, 0),
            _ANY_SPECIFIC),
    Feature("tensormap.replace", "tensormap.replace (device-side TMA descriptor edits)", 90, (8, 3),
            _ANY_SPECIFIC),
    Feature("tcgen05", "tcgen05 (UMMA, tensor memory)", 100, (8, 6), _ANY_SPECIFIC,
            frozenset({10, 11})),
    Feature("tcgen05.kind::i8", "tcgen05.mma kind::i8", 100, (8, 6),
            only=frozenset({"sm_100a", "sm_110a"})),
    Feature("tcgen05.scale_vec", "tcgen05.mma block_scale .scale_vec::NX", 100, (8, 6),
            frozenset({"a"}), frozenset({10, 11})),
    Feature("tcgen05.block16/32", "tcgen05.mma block_scale .block16/.block32", 100, (8, 8),
            _ANY_SPECIFIC, frozenset({10, 11})),
    Feature("tcgen05.scale_input_d", "tcgen05.mma scale-input-d immediate", 100, (8, 6),
            _ANY_SPECIFIC, frozenset({10})),
    Feature("tcgen05.shift", "tcgen05.shift (TMEM rows down by one lane)", 100, (8, 6),
            frozenset({"a"}), frozenset({10, 11})),
    Feature("tcgen05.mxf4.sp", "tcgen05.mma.sp kind::mxf4 / kind::mxf4nvf4", 100, (8, 6),
            frozenset({"a"}), frozenset({10, 11})),
    Feature("mma.block_scale", "mma.sync block_scale (SM120 MX/NV formats)", 120, (8, 7),
            _ANY_SPECIFIC, frozenset({12})),
    Feature("mma.block_scale.mxf4.sp", "mma.sp::ordered_metadata block_scale kind::mxf4/"
            "mxf4nvf4 (m16n8k128)", 120, (8, 7), frozenset({"a"}), frozenset({12})),
    Feature("mma.f8f6f4.fp8", "mma.sync kind::f8f6f4 with e4m3/e5m2 inputs only", 100, (8, 6),
            _ANY_SPECIFIC),
    Feature("mma.f8f6f4", "mma.sync kind::f8f6f4 (FP6/FP4 inputs)", 120, (8, 7), _ANY_SPECIFIC,
            frozenset({12})),
)

_FEATURE_BY_NAME = {f.name: f for f in FEATURES}


def feature(name: str) -> Feature:
    return lookup(_FEATURE_BY_NAME, name, lambda: TargetError(
        f"unknown feature '{name}'; known features: {', '.join(_FEATURE_BY_NAME)}"))


def targets_with(feature_name: str, among: Iterable[Target] | None = None) -> list[Target]:
    f = feature(feature_name)
    return [t for t in (among if among is not None else TARGETS.values()) if f.available_on(t)]
