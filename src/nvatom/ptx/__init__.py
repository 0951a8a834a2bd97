"""PTX text: the module/kernel builder and emitters that read the atom tables."""
