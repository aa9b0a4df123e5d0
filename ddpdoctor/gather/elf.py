"""A small, pure ELF reader: a shared object's DT_NEEDED names, its undefined dynamic symbols, and whether another
shared object exports a given symbol (through its .gnu.hash table, so a 400 MB libtorch_cpu.so is never scanned
whole). 64-bit little-endian objects only (x86-64, aarch64); anything else reads as None. No subprocess, no import
of the object, no dlopen: only the sections named here are read (ELF-64 object file format, System V gABI; the
.gnu.hash layout as glibc's dl-lookup.c reads it)."""
from __future__ import annotations

import struct
from typing import Dict, List, Optional

SHT_DYNAMIC, SHT_DYNSYM, SHT_GNU_HASH = 6, 11, 0x6FFFFFF6
SHT_GNU_VERDEF, SHT_GNU_VERNEED = 0x6FFFFFFD, 0x6FFFFFFE
DT_NEEDED, DT_RPATH, DT_RUNPATH = 1, 15, 29
STB_GLOBAL = 1
MAX_SECTION = 64 << 20  # a section larger than this is not read (a corrupt header)
FATBIN_MAGIC = 0xBA55ED50  # NVIDIA's fatbinary_section.h / fatbinary.h FATBIN_MAGIC
MAX_FATBIN_CONTAINERS, MAX_FATBIN_GAP = 50000, 1 << 20


class ElfObject:
    """The dynamic sections of one shared object, read lazily from an open file."""

    def __init__(self, path: str):
        self.path = path
        from ddpdoctor.model.inputs import open_regular

        self.fh = open_regular(path, "rb")  # a FIFO named like a library would block open() for ever
        head = self.fh.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            self.fh.close()
            raise ValueError("not a 64-bit little-endian ELF object")
        shoff, = struct.unpack_from("<Q", head, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
        if shentsize != 64 or not 0 < shnum < 4096:
            self.fh.close()
            raise ValueError("no section headers")
        self.fh.seek(shoff)
        raw = self.fh.read(64 * shnum)
        # (type, offset, size, link) per section
        headers = [struct.unpack_from("<IIQQQQIIQQ", raw, 64 * i) for i in range(len(raw) // 64)]
        self.sections = [(h[1], h[4], h[5], h[6]) for h in headers]
        self._name_offsets = [h[0] for h in headers]
        self._shstrndx, = struct.unpack_from("<H", head, 0x3E)
        self._cache: Dict[int, bytes] = {}

    def close(self) -> None:
        self.fh.close()

    def _find(self, sh_type: int) -> Optional[int]:
        for i, s in enumerate(self.sections):
            if s[0] == sh_type:
                return i
        return None

    def _data(self, index: int) -> bytes:
        if index not in self._cache:
            _, off, size, _ = self.sections[index]
            if size > MAX_SECTION:
                raise ValueError("section too large")
            self.fh.seek(off)
            self._cache[index] = self.fh.read(size)
        return self._cache[index]

    @staticmethod
    def _name(strtab: bytes, off: int) -> str:
        end = strtab.find(b"\0", off)
        return strtab[off:end if end >= 0 else len(strtab)].decode("ascii", "replace")

    def needed(self) -> List[str]:
        return self._dynamic_strings(DT_NEEDED)

    def runpath(self) -> List[str]:
        """DT_RUNPATH's (else DT_RPATH's) directories, unexpanded ($ORIGIN kept)."""
        for tag in (DT_RUNPATH, DT_RPATH):
            found = [d for text in self._dynamic_strings(tag) for d in text.split(":") if d]
            if found:
                return found
        return []

    def search_paths(self) -> Dict[str, List[str]]:
        """{"rpath": [...], "runpath": [...]}: DT_RPATH's and DT_RUNPATH's directories apart, unexpanded. ld.so(8)
        searches DT_RPATH before LD_LIBRARY_PATH only when the object has no DT_RUNPATH, DT_RUNPATH after it."""
        return {key: [d for text in self._dynamic_strings(tag) for d in text.split(":") if d]
                for key, tag in (("rpath", DT_RPATH), ("runpath", DT_RUNPATH))}

    def section_named(self, name: str) -> Optional[tuple]:
        """(file offset, size) of the section called `name` (through .shstrtab), or None."""
        if not 0 <= self._shstrndx < len(self.sections):
            return None
        _, off, size, _ = self.sections[self._shstrndx]
        if size > MAX_SECTION:
            return None
        self.fh.seek(off)
        names = self.fh.read(size)
        for i, at in enumerate(self._name_offsets):
            if self._name(names, at) == name:
                return self.sections[i][1], self.sections[i][2]
        return None

    def cuda_archs(self, deadline: Optional[float] = None) -> Optional[Dict[str, List[int]]]:
        """{"sass": [52, 80, ...], "ptx": [...]}: the GPU architectures of the CUDA code in the object's .nv_fatbin
        section - the cubins (entry kind 2: machine code for sm_XY) and the PTX (kind 1: compiled by the driver for
        sm_XY and newer) - or None when it has no such section (no CUDA device code). The fat binary container is
        NVIDIA's (fatbinary_section.h: magic 0xBA55ED50, version 1, a 16-byte header whose last field is the size of
        what follows); each entry's header gives its kind (u16 at 0), its header size (u32 at 4), its payload size
        (u64 at 8) and its sm_XY (u32 at 28), as cuobjdump lists them ("arch = sm_52"). Only headers are read: the
        payloads are skipped, so a 1 GB libtorch_cuda.so costs one small read per entry."""
        import time

        where = self.section_named(".nv_fatbin")
        if where is None:
            return None
        start, size = where
        end = start + size
        pos, found = start, {1: set(), 2: set()}
        containers = 0
        while pos + 16 <= end and containers < MAX_FATBIN_CONTAINERS:
            self.fh.seek(pos)
            head = self.fh.read(16)
            if len(head) < 16:
                break
            magic, version, hsize, fat = struct.unpack_from("<IHHQ", head)
            if magic != FATBIN_MAGIC:
                nxt = self._next_magic(pos + 8, end)
                if nxt is None:
                    break
                pos = nxt
                continue
            containers += 1
            entry, stop = pos + hsize, min(pos + hsize + fat, end)
            while entry + 32 <= stop:
                self.fh.seek(entry)
                rec = self.fh.read(32)
                if len(rec) < 32:
                    break
                kind, _attr, ehsize, payload = struct.unpack_from("<HHIQ", rec)
                arch, = struct.unpack_from("<I", rec, 28)
                if kind in found and 10 <= arch < 1000:
                    found[kind].add(arch)
                if ehsize < 32 or ehsize + payload <= 0:
                    break
                entry += ehsize + payload
            pos = (pos + hsize + fat + 7) // 8 * 8
            if deadline is not None and time.monotonic() > deadline:
                break
        return {"sass": sorted(found[2]), "ptx": sorted(found[1])}

    def _next_magic(self, pos: int, end: int) -> Optional[int]:
        """The offset of the next fat binary header at or after `pos` (8-aligned search, bounded), or None."""
        needle = struct.pack("<I", FATBIN_MAGIC)
        limit = min(end, pos + MAX_FATBIN_GAP)
        while pos < limit:
            self.fh.seek(pos)
            block = self.fh.read(min(1 << 16, limit - pos) + 3)
            i = block.find(needle)
            while i >= 0 and (pos + i) % 8:
                i = block.find(needle, i + 1)
            if i >= 0:
                return pos + i
            pos += 1 << 16
        return None

    def _version_names(self, sh_type: int, head: str, aux: str, cnt_at: int, aux_at: int, next_at: int,
                       name_at: int, aux_next_at: int) -> Dict[str, List[str]]:
        i = self._find(sh_type)
        if i is None:
            return {}
        link = self.sections[i][3]
        if not 0 <= link < len(self.sections):
            return {}
        data, strtab = self._data(i), self._data(link)
        out: Dict[str, List[str]] = {}
        off, seen = 0, 0
        while 0 <= off < len(data) and seen < 4096:
            rec = struct.unpack_from(head, data, off)
            cnt, aux_off, nxt = rec[cnt_at], rec[aux_at], rec[next_at]
            owner = self._name(strtab, rec[2]) if sh_type == SHT_GNU_VERNEED else ""
            a = off + aux_off
            for _ in range(min(cnt, 256)):
                if not 0 <= a < len(data):
                    break
                arec = struct.unpack_from(aux, data, a)
                out.setdefault(owner, []).append(self._name(strtab, arec[name_at]))
                if not arec[aux_next_at]:
                    break
                a += arec[aux_next_at]
            seen += 1
            if not nxt:
                break
            off += nxt
        return out

    def version_defs(self) -> List[str]:
        """The symbol version names this object defines (.gnu.version_d): GLIBCXX_3.4.30, CXXABI_1.3.8 ..."""
        return [n for names in self._version_names(SHT_GNU_VERDEF, "<HHHHIII", "<II", 3, 5, 6, 0, 1).values()
                for n in names]

    def version_needs(self) -> Dict[str, List[str]]:
        """{library: [version names]} this object needs (.gnu.version_r): {"libstdc++.so.6": ["GLIBCXX_3.4.30"]}."""
        return self._version_names(SHT_GNU_VERNEED, "<HHIII", "<IHHII", 1, 3, 4, 3, 4)

    def _dynamic_strings(self, wanted: int) -> List[str]:
        i = self._find(SHT_DYNAMIC)
        if i is None:
            return []
        link = self.sections[i][3]
        if not 0 <= link < len(self.sections):
            return []
        data, strtab = self._data(i), self._data(link)
        out = []
        for tag, val in struct.iter_unpack("<qQ", data[: len(data) // 16 * 16]):
            if tag == 0:
                break
            if tag == wanted:
                out.append(self._name(strtab, val))
        return out

    def _dynsym(self):
        i = self._find(SHT_DYNSYM)
        if i is None:
            return None, None
        link = self.sections[i][3]
        if not 0 <= link < len(self.sections):
            return None, None
        return self._data(i), self._data(link)

    def undefined(self, prefixes: tuple = ()) -> List[str]:
        """The GLOBAL undefined dynamic symbols (a WEAK one may stay unresolved), those starting with one of
        `prefixes` when given."""
        syms, strtab = self._dynsym()
        if syms is None:
            return []
        out = []
        for name, info, _other, shndx, _v, _s in struct.iter_unpack("<IBBHQQ", syms[: len(syms) // 24 * 24]):
            if shndx == 0 and name and info >> 4 == STB_GLOBAL:
                sym = self._name(strtab, name)
                if not prefixes or sym.startswith(prefixes):
                    out.append(sym)
        return out

    def exports(self, names) -> Optional[set]:
        """Which of `names` this object defines in its dynamic symbol table, looked up through .gnu.hash; None when
        the object has no .gnu.hash (not judged)."""
        gh = self._find(SHT_GNU_HASH)
        syms, strtab = self._dynsym()
        if gh is None or syms is None:
            return None
        data = self._data(gh)
        if len(data) < 16:
            return None
        nbuckets, symoffset, bloom_size, _shift = struct.unpack_from("<IIII", data, 0)
        if nbuckets == 0:
            return set()
        base = 16 + 8 * bloom_size
        buckets = struct.unpack_from(f"<{nbuckets}I", data, base)
        chain_base = base + 4 * nbuckets
        nsyms = len(syms) // 24
        found = set()
        for name in names:
            h = 5381
            for c in name.encode():
                h = (h * 33 + c) & 0xFFFFFFFF
            i = buckets[h % nbuckets]
            if i < symoffset:
                continue
            while i < nsyms:
                pos = chain_base + 4 * (i - symoffset)
                if pos + 4 > len(data):
                    break
                ch, = struct.unpack_from("<I", data, pos)
                if (ch | 1) == (h | 1):
                    st_name, _info, _other, shndx = struct.unpack_from("<IBBH", syms, 24 * i)
                    if shndx != 0 and self._name(strtab, st_name) == name:
                        found.add(name)
                        break
                if ch & 1:
                    break
                i += 1
        return found


def read_object(path: str) -> Optional[ElfObject]:
    """An ElfObject, or None when the file is not a readable 64-bit little-endian ELF shared object."""
    try:
        return ElfObject(path)
    except (OSError, ValueError, struct.error):
        return None
