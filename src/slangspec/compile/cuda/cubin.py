"""What a cubin must be before a process keeps one another process built (the compile server):
a 64-bit ELF file for NVIDIA's GPUs (``EM_CUDA``), for the architecture asked for, holding the
code of the kernel it is named for. Read from the ELF header and section table alone."""

from __future__ import annotations

import struct

EM_CUDA = 190


def sm_version(cubin: bytes) -> int:
    """The SM version a cubin's ELF flags name (``90`` for ``sm_90``): their low byte up to ELF
    ABI version 7 (CUDA 12), the next byte from version 8 (CUDA 13)."""
    (flags,) = struct.unpack_from("<I", cubin, 48)
    return flags & 0xFF if cubin[8] <= 7 else (flags >> 8) & 0xFF


def section_names(cubin: bytes) -> list[str]:
    """The names of an ELF file's sections; ValueError where its section table does not fit
    the file."""
    try:
        (table,) = struct.unpack_from("<Q", cubin, 40)
        size, count, names_index = struct.unpack_from("<HHH", cubin, 58)
        headers = [struct.unpack_from("<IIQQQQ", cubin, table + i * size) for i in range(count)]
        strings = headers[names_index][4]
        names = []
        for header in headers:
            start = strings + header[0]
            names.append(cubin[start : cubin.index(b"\0", start)].decode())
        return names
    except (struct.error, IndexError, ValueError) as exc:
        raise ValueError(f"its section table is unreadable ({exc})") from None


def cubin_problem(cubin: bytes, arch: str, entry: str) -> str | None:
    """Why ``cubin`` is not the code of kernel ``entry`` for ``arch`` (``sm_90``); None when
    it is."""
    if len(cubin) < 64 or cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        return "it is not a 64-bit ELF file"
    (machine,) = struct.unpack_from("<H", cubin, 18)
    if machine != EM_CUDA:
        return f"its ELF machine is {machine}, not CUDA's ({EM_CUDA})"
    wanted = int(arch.removeprefix("sm_").rstrip("af"))
    if sm_version(cubin) != wanted:
        return f"it is built for sm_{sm_version(cubin)}, not {arch}"
    try:
        names = section_names(cubin)
    except ValueError as exc:
        return str(exc)
    if f".text.{entry}" not in names:
        return f"it holds no code of kernel {entry}"
    return None
