"""What a cubin must be before a process keeps one another process built (the compile server):
a 64-bit ELF file for NVIDIA's GPUs (``EM_CUDA``), for the architecture asked for, holding the
code of the kernel it is named for, read from the ELF header and section table alone; and how
many registers each of its kernels takes, from the attributes ptxas writes in ``.nv.info``."""

from __future__ import annotations

import struct
from typing import NamedTuple

EM_CUDA = 190


def sm_version(cubin: bytes) -> int:
    """The SM version a cubin's ELF flags name (``90`` for ``sm_90``): their low byte up to ELF
    ABI version 7 (CUDA 12), the next byte from version 8 (CUDA 13)."""
    (flags,) = struct.unpack_from("<I", cubin, 48)
    return flags & 0xFF if cubin[8] <= 7 else (flags >> 8) & 0xFF


class _Section(NamedTuple):
    name: str
    kind: int
    start: int
    size: int
    link: int


_SYMBOL_TABLE = 2  # SHT_SYMTAB
_SYMBOL = struct.Struct("<IBBHQQ")  # Elf64_Sym
_SIZED_ATTRIBUTE = 4  # EIFMT_SVAL: a 16-bit size, then that many bytes
_REGISTER_COUNT = 0x2F  # EIATTR_REGCOUNT: a kernel's symbol index, then its registers


def _sections(cubin: bytes) -> list[_Section]:
    """An ELF file's sections; ValueError where its section table does not fit the file."""
    try:
        (table,) = struct.unpack_from("<Q", cubin, 40)
        size, count, names_index = struct.unpack_from("<HHH", cubin, 58)
        headers = [struct.unpack_from("<IIQQQQI", cubin, table + i * size) for i in range(count)]
        strings = headers[names_index][4]
        return [_Section(_string(cubin, strings + h[0]), h[1], h[4], h[5], h[6]) for h in headers]
    except (struct.error, IndexError, ValueError) as exc:
        raise ValueError(f"its section table is unreadable ({exc})") from None


def _string(data: bytes, start: int) -> str:
    return data[start : data.index(b"\0", start)].decode()


def section_names(cubin: bytes) -> list[str]:
    """The names of an ELF file's sections; ValueError where its section table does not fit
    the file."""
    return [section.name for section in _sections(cubin)]


def kernel_registers(cubin: bytes) -> dict[str, int]:
    """The registers each kernel of ``cubin`` takes a thread, by kernel name; ValueError where
    the file cannot be read so."""
    sections = _sections(cubin)
    try:
        (symbols,) = (s for s in sections if s.kind == _SYMBOL_TABLE)
        names = sections[symbols.link].start
        table = [
            _SYMBOL.unpack_from(cubin, symbols.start + i * _SYMBOL.size)
            for i in range(symbols.size // _SYMBOL.size)
        ]
        (info,) = (s for s in sections if s.name == ".nv.info")
        found = {}
        at, end = info.start, info.start + info.size
        while at < end and cubin[at] == _SIZED_ATTRIBUTE:
            attribute, size = cubin[at + 1], struct.unpack_from("<H", cubin, at + 2)[0]
            if attribute == _REGISTER_COUNT:
                symbol, count = struct.unpack_from("<II", cubin, at + 4)
                found[_string(cubin, names + table[symbol][0])] = count
            at += 4 + size
        return found
    except (struct.error, IndexError, ValueError) as exc:
        raise ValueError(f"its kernels' attributes are unreadable ({exc})") from None


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
