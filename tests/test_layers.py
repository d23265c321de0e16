"""The layers hold: the package's root holds only its face and the foundation (errors, formats,
define, settings); the rooms import in the order data flows (signatures, specializer, codegen,
compile, runtime, aot, cli), each only itself, the foundation and the rooms before it, with the
cache store beside them importing only itself, the standard library, its storage libraries and
the foundation; the rest of slangspec uses only what the cache store's ``__init__`` exports;
the compile path is imported only by the runtime's build backends, the aot room and the command
line, and only through what its ``__init__`` exports; the compiler and device code are handed
paths, never the cache; and no module of slangspec imports one that imports it back, however
late or only for type checking."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).parent.parent / "src" / "slangspec"
STORE = "slangspec.cache_store"
STORE_MAY_IMPORT = {"diskcache", "xxhash", "platformdirs"}
STORE_MAY_USE = {"slangspec.define", "slangspec.errors", "slangspec.formats", "slangspec.settings"}
"""The foundation every room may read: it knows nothing of kernels, caches or devices."""
COMPILE = "slangspec.compile"
COMPILE_USERS = {
    "slangspec",  # the package's face names SlangCompileError, the error users catch
    "slangspec.runtime.backend",
    "slangspec.runtime.cuda_backend",
    "slangspec.runtime.vulkan_backend",
}
"""The modules outside the compile path that import it, besides the rooms that may import it
whole (``COMPILE_ROOMS``): the package's face and the runtime's build backends (and what they
share)."""
COMPILE_ROOMS = ("slangspec.aot", "slangspec.cli")
"""The rooms every module of which may import the compile path: ahead of time (warm, bundles,
kernels shipped in a package) and the command line."""


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in SRC.rglob("*.py")}
PACKAGES = {module_name(p) for p in SRC.rglob("__init__.py")}
FACE = {"slangspec", "slangspec.__main__"}
ROOT = ["__init__.py", "__main__.py", "define.py", "errors.py", "formats.py", "settings.py"]
"""The package's root: the face (``__init__``, ``__main__``) and the foundation every room may
read; everything else is in a room."""
ROOMS = ("signatures", "specializer", "codegen", "compile", "runtime", "aot", "cli")
"""The pipeline's rooms in the order data flows through them: Python values to a signature, a
plan, a source, a compiled kernel, a dispatch; ahead-of-time work over them; the commands."""
STORE_ROOM = "cache_store"
"""The room beside the pipeline, which imports only the foundation."""
STORE_FROM = "specializer"
"""The first room that may import the cache store."""


def imports(path: Path, name: str | None = None) -> Iterator[tuple[str, list[str]]]:
    """Every import statement in ``path``, anywhere in it (in functions too, and for type
    checking), as the module it names, relative imports resolved against the package of the
    module ``name`` (by default the one ``path`` is), and the names it takes from that module
    (none for a plain ``import``)."""
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, []
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*(base if node.level else []), *filter(None, [node.module])])
            yield module, [a.name for a in node.names]


def imported(path: Path, name: str | None = None) -> set[str]:
    """Every module ``path`` imports anywhere in it (see ``imports``); ``from package import
    name`` imports the module ``package.name`` when there is one."""
    found = set()
    for module, names in imports(path, name):
        if not names:
            found.add(module)
        for n in names:
            inner = f"{module}.{n}"
            found.add(inner if inner in MODULES else module)
    return found


def face_exports(package: str) -> set[str]:
    """The names a package's ``__init__`` (its face) exports: the modules it names whole
    (``_WHOLE``) and the names it imports on first use (``_HOME``), its ``__all__``."""
    found = {}
    face = SRC.joinpath(*package.split(".")[1:], "__init__.py")
    for node in ast.parse(face.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            found[ast.unparse(node.targets[0])] = node.value
    assert ast.unparse(found["__all__"]) == "sorted([*_WHOLE, *_HOME])"
    return {*ast.literal_eval(found["_WHOLE"]), *ast.literal_eval(found["_HOME"])}


def past_the_face(path: Path, package: str, name: str | None = None) -> set[str]:
    """What ``path`` (the module ``name``, by default the one it is) reaches of ``package``
    past its ``__init__``: a module of it imported by its path, a name imported from the package
    that ``__all__`` does not export (a module of it among them), or such a name read off the
    package imported whole. A name exported is no deep import, a module named whole in
    ``__all__`` included, while importing from inside that module by its path is one."""
    exported = face_exports(package)
    leaf = package.rpartition(".")[2]
    deep = set()
    whole = set()  # the names the package itself is bound to
    for module, names in imports(path, name):
        if module.startswith(package + "."):
            deep.add(module)
        elif module == package:
            deep.update(f"{package}.{n}" for n in names if n not in exported)
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            whole.update(a.asname or a.name for a in node.names if a.name == leaf)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in whole
            and node.attr not in exported
        ):
            deep.add(f"{package}.{node.attr}")
    return deep


def past_the_store(path: Path, name: str | None = None) -> set[str]:
    """What ``path`` reaches of the cache store past its face (``past_the_face``)."""
    return past_the_face(path, STORE, name)


def compile_use(path: Path, name: str | None = None) -> list[str]:
    """How ``path`` (the module ``name``, by default the one it is), a module outside the
    compile path, breaks its layer: importing it at all where it is not one of
    ``COMPILE_USERS`` or of ``COMPILE_ROOMS``, and any import past its face (``past_the_face``)."""
    name = name or module_name(path)
    broken = [f"{name} reaches {deep}" for deep in sorted(past_the_face(path, COMPILE, name))]
    user = name in COMPILE_USERS or any(
        name == room or name.startswith(room + ".") for room in COMPILE_ROOMS
    )
    if not user and any(m == COMPILE or m.startswith(COMPILE + ".") for m in imported(path, name)):
        broken.insert(0, f"{name} imports {COMPILE}")
    return broken


def slangspec_imports(path: Path, name: str | None = None) -> set[str]:
    """The slangspec modules ``path`` (the module ``name``, by default the one it is) imports
    (an import of a name inside a module, the module)."""
    name = name or module_name(path)
    out = set()
    for found in imported(path, name):
        while found and found not in MODULES:
            found = found.rpartition(".")[0]
        if found:
            out.add(found)
    return out - {name}


def room_of(name: str) -> str:
    """Where the module ``name`` sits: ``face`` (the package's ``__init__`` and ``__main__``),
    ``foundation`` (the other modules at the root), else its room (the subpackage it is in)."""
    if name in FACE:
        return "face"
    room = name.split(".")[1]
    return room if f"slangspec.{room}" in PACKAGES else "foundation"


def against_the_flow(path: Path, name: str | None = None) -> list[str]:
    """Each import of ``path`` (the module ``name``, by default the one it is) that goes against
    the rooms' order: a module imports its own room, the foundation and the rooms before its own
    in ``ROOMS``, never one after; the cache store, beside them, imports only the foundation and
    is imported from ``STORE_FROM`` on; the face imports anything and nothing imports it."""
    name = name or module_name(path)
    here = room_of(name)
    if here == "face":
        return []
    broken = []
    for target in sorted(slangspec_imports(path, name)):
        there = room_of(target)
        if there in (here, "foundation"):
            continue
        if there == STORE_ROOM:
            allowed = here in ROOMS and ROOMS.index(here) >= ROOMS.index(STORE_FROM)
        elif there in ROOMS:
            allowed = here in ROOMS and ROOMS.index(there) < ROOMS.index(here)
        else:
            allowed = False  # the face
        if not allowed:
            broken.append(f"{name} ({here}) imports {target} ({there})")
    return broken


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("path", sorted((SRC / "cache_store").glob("*.py")), ids=lambda p: p.name)
def test_the_cache_store_imports_only_itself_the_standard_library_and_its_storage(path):
    for name in imported(path):
        top = name.split(".")[0]
        if name in STORE_MAY_USE or name == STORE or name.startswith(STORE + "."):
            continue
        assert top in sys.stdlib_module_names or top in STORE_MAY_IMPORT, (
            f"{path.name} imports {name}"
        )


def test_the_rest_of_slangspec_uses_only_what_the_cache_store_exports():
    deep = {
        name: sorted(past_the_store(path))
        for name, path in MODULES.items()
        if name != STORE and not name.startswith(STORE + ".")
    }
    assert {name: found for name, found in deep.items() if found} == {}


def test_a_deep_import_of_the_cache_store_is_found(tmp_path):
    """The rule above cannot pass for want of seeing: each way past ``__init__`` is found."""
    synthetic = tmp_path / "synthetic.py"
    synthetic.write_text(
        "from slangspec.cache_store.keys import x\n"
        "from .cache_store import FORWARD, key_of, travel\n"
        "from . import cache_store as store\n"
        "import slangspec.cache_store.location\n"
        "if store.CacheStore:\n"
        "    store.policy.select()\n"
        "def later():\n"
        "    from .cache_store import disk\n"
        "    from .cache_store.travel import sealed\n"
    )
    assert past_the_store(synthetic, "slangspec.synthetic") == {
        "slangspec.cache_store.disk",
        "slangspec.cache_store.keys",
        "slangspec.cache_store.location",
        "slangspec.cache_store.policy",
        "slangspec.cache_store.travel",
    }
    exported = tmp_path / "exported.py"
    exported.write_text("from .cache_store import CacheStore, key_of, travel\n")
    assert past_the_store(exported, "slangspec.exported") == set()


def test_only_the_backends_and_the_warm_and_aot_code_import_compile_through_its_face():
    broken = [
        problem
        for name, path in MODULES.items()
        if name != COMPILE and not name.startswith(COMPILE + ".")
        for problem in compile_use(path)
    ]
    assert broken == []


def test_the_compile_paths_users_are_modules():
    assert set(MODULES) >= COMPILE_USERS | set(COMPILE_ROOMS)


def test_a_forbidden_import_of_compile_is_found(tmp_path):
    """The rule above cannot pass for want of seeing: a module that may not import the compile
    path is found importing its face, and each way past the face is found in one that may."""
    synthetic = tmp_path / "synthetic.py"
    synthetic.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from ..compile import CompiledKernel\n"
    )
    assert compile_use(synthetic, "slangspec.runtime.launch") == [
        "slangspec.runtime.launch imports slangspec.compile"
    ]
    assert compile_use(synthetic, "slangspec.runtime.vulkan_backend") == []
    assert compile_use(synthetic, "slangspec.aot.bundle") == []
    deep = tmp_path / "deep.py"
    deep.write_text(
        "from ..compile.cuda.source import front_end\n"
        "from ..compile import cuda, server_client, toolchain\n"
        "from .. import compile as face\n"
        "import slangspec.compile.server.client\n"
        "def later():\n"
        "    from ..compile.slang import api\n"
        "    return face.server.serve\n"
    )
    assert compile_use(deep, "slangspec.runtime.cuda_backend") == [
        f"slangspec.runtime.cuda_backend reaches {COMPILE}.{reached}"
        for reached in ["cuda", "cuda.source", "server", "server.client", "slang"]
    ]


def tier_classes() -> set[str]:
    """The classes a tier is, or a tier's lookup gives: the ``Tier`` protocol and those under
    it, every cache store class that has each method the protocol declares (tiers implement it
    without naming it), and the classes its ``get`` returns."""
    protocol = next(
        node
        for node in ast.parse((SRC / "cache_store" / "tier.py").read_text()).body
        if isinstance(node, ast.ClassDef) and node.name == "Tier"
    )
    methods = {n.name for n in protocol.body if isinstance(n, ast.FunctionDef)}
    get = next(n for n in protocol.body if isinstance(n, ast.FunctionDef) and n.name == "get")
    assert get.returns is not None
    found = {n.id for n in ast.walk(get.returns) if isinstance(n, ast.Name)} - {"None"}
    classes = {
        node.name: node
        for path in (SRC / "cache_store").glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
    }

    def defined(node: ast.ClassDef) -> set[str]:
        """The methods a class defines, in its body or in a base of the cache store's."""
        own = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in classes:
                own |= defined(classes[base.id])
        return own

    for node in classes.values():
        bases = {ast.unparse(b) for b in node.bases}
        if node.name == "Tier" or "Tier" in bases or methods <= defined(node):
            found.add(node.name)
    return found


def tier_class_checks(path: Path) -> list[str]:
    """Each ``isinstance`` in ``path`` whose classes name a tier class (``tier_classes``)."""
    tiers = tier_classes()
    asked = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "isinstance":
            named = {
                n.id if isinstance(n, ast.Name) else n.attr
                for n in ast.walk(node.args[1])
                if isinstance(n, ast.Name | ast.Attribute)
            }
            if named & tiers:
                asked.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return asked


def test_the_tier_classes_are_the_tiers_and_their_lookup_results():
    assert {"Tier", "SharedTier", "DiskTier", "ShippedTier", "RemoteTier"} <= tier_classes()
    assert {"Found", "Unusable"} <= tier_classes()
    assert "Unavailable" not in tier_classes()


@pytest.mark.parametrize("path", sorted((SRC / "cache_store").glob("*.py")), ids=lambda p: p.name)
def test_the_cache_store_asks_no_tier_its_class(path):
    """A tier says what it is by what it has (``shared``, ``proven``, ``writable``), a lookup
    result by its ``usable``; the cache keeps the remote tier it made by name."""
    assert tier_class_checks(path) == []


def test_asking_a_tier_its_class_is_found(tmp_path):
    synthetic = tmp_path / "synthetic.py"
    synthetic.write_text(
        "if isinstance(got, Found):\n"
        "    pass\n"
        "tiers = [t for t in far if isinstance(t, (int, remote.RemoteTier))]\n"
        "text = isinstance(data, str)\n"
    )
    assert tier_class_checks(synthetic) == [
        "synthetic.py:1: isinstance(got, Found)",
        "synthetic.py:3: isinstance(t, (int, remote.RemoteTier))",
    ]


@pytest.mark.parametrize("name", ["compile/slang/vulkan_compiler.py", "runtime/devices.py"])
def test_compiler_and_devices_do_not_know_the_cache(name):
    cache = ("slangspec.cache_store", "slangspec.runtime.cache")
    assert {m for m in imported(SRC / name) if m.startswith(cache)} == set()


def test_devices_read_no_setting():
    # What of the settings devices need, their callers read and hand them.
    assert "slangspec.settings" not in imported(SRC / "runtime" / "devices.py")


def bound_names(path: Path) -> set[str]:
    """The names ``path`` binds at its top level (type checking's imports included): what it
    defines, assigns and imports."""
    names = set()
    body = list(ast.parse(path.read_text()).body)
    while body:
        node = body.pop()
        if isinstance(node, ast.If | ast.Try):
            body += [*node.body, *node.orelse]
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
    return names


def misplaced_names(face: Path, package: str | None = None) -> list[str]:
    """What a lazy face (``face``, the ``__init__`` of ``package``) names that is not where it
    says: a name it imports on first use (``_HOME``) from a module that is not there or does
    not bind it, a module it names whole (``_WHOLE``) that is not there."""
    package = package or module_name(face)
    tables = {}
    for node in ast.parse(face.read_text()).body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) in ("_HOME", "_WHOLE"):
            tables[ast.unparse(node.targets[0])] = ast.literal_eval(node.value)
    whole = tables.get("_WHOLE", ())
    if not isinstance(whole, dict):
        whole = {name: f".{name}" for name in whole}
    wrong = []
    for name, home in sorted(tables["_HOME"].items()):
        module = package + home
        if module not in MODULES:
            wrong.append(f"{package}.{name}: no module {module}")
        elif name not in bound_names(MODULES[module]):
            wrong.append(f"{package}.{name}: {module} binds no {name}")
    wrong += [
        f"{package}.{name}: no module {package + home}"
        for name, home in sorted(whole.items())
        if package + home not in MODULES
    ]
    return wrong


LAZY_FACES = sorted(path for path in SRC.rglob("__init__.py") if "\n_HOME = " in path.read_text())


@pytest.mark.parametrize("face", LAZY_FACES, ids=module_name)
def test_each_name_a_lazy_face_exports_is_where_it_says(face):
    """A name moved without its face learning of it fails here, not at its first use."""
    assert misplaced_names(face) == []


def test_the_lazy_faces_are_found():
    assert {module_name(p) for p in LAZY_FACES} == {
        "slangspec",
        "slangspec.cache_store",
        "slangspec.codegen",
        "slangspec.compile",
        "slangspec.signatures",
        "slangspec.specializer",
    }


def test_a_name_a_lazy_face_misplaces_is_found(tmp_path):
    face = tmp_path / "__init__.py"
    face.write_text(
        '_WHOLE = ("travel", "units")\n'
        '_HOME = {"setting": ".settings", "key_of": ".keys", "nothing": ".keys"}\n'
    )
    assert misplaced_names(face, STORE) == [
        "slangspec.cache_store.nothing: slangspec.cache_store.keys binds no nothing",
        "slangspec.cache_store.setting: no module slangspec.cache_store.settings",
        "slangspec.cache_store.units: no module slangspec.cache_store.units",
    ]


def test_the_root_holds_only_the_face_and_the_foundation():
    assert sorted(p.name for p in SRC.glob("*.py")) == ROOT
    assert len(ROOT) <= 6


MAX_LINES = 600
"""The longest a module may grow before it is split along a seam of its own."""


def too_long(root: Path) -> list[str]:
    """The modules under ``root`` longer than ``MAX_LINES``, with their lengths."""
    lengths = {p: len(p.read_text().splitlines()) for p in sorted(root.rglob("*.py"))}
    return [f"{p.relative_to(root)}: {n} lines" for p, n in lengths.items() if n > MAX_LINES]


def test_no_module_is_longer_than_the_bound():
    assert too_long(SRC) == []


def test_a_module_longer_than_the_bound_is_found(tmp_path):
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "room").mkdir()
    (tmp_path / "room" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert too_long(tmp_path) == [f"room/long.py: {MAX_LINES + 1} lines"]


def test_every_room_has_its_place_in_the_order():
    rooms = {name.split(".")[1] for name in PACKAGES if name != "slangspec"}
    assert rooms == {*ROOMS, STORE_ROOM}


def test_every_import_goes_with_the_rooms_order():
    broken = [problem for path in MODULES.values() for problem in against_the_flow(path)]
    assert broken == []


def test_an_import_against_the_rooms_order_is_found(tmp_path):
    """The rule above cannot pass for want of seeing: a later room, the cache store and the face
    imported from an earlier room are each found, lazily imported too, while the room itself,
    the foundation and earlier rooms are not; the foundation may import no room, and the cache
    store no room either."""
    synthetic = tmp_path / "synthetic.py"
    synthetic.write_text(
        "import slangspec.runtime\n"
        "from ..codegen import kernel_source\n"
        "from ..cache_store import key_of\n"
        "from .. import Module\n"
        "from . import text\n"
        "from ..errors import Error\n"
        "from ..settings import setting\n"
        "def later():\n"
        "    from ..aot.warm import warm\n"
    )
    assert against_the_flow(synthetic, "slangspec.signatures.synthetic") == [
        "slangspec.signatures.synthetic (signatures) imports slangspec (face)",
        "slangspec.signatures.synthetic (signatures) imports slangspec.aot.warm (aot)",
        "slangspec.signatures.synthetic (signatures) imports slangspec.cache_store (cache_store)",
        "slangspec.signatures.synthetic (signatures) imports slangspec.codegen (codegen)",
        "slangspec.signatures.synthetic (signatures) imports slangspec.runtime (runtime)",
    ]
    assert against_the_flow(synthetic, "slangspec.runtime.synthetic") == [
        "slangspec.runtime.synthetic (runtime) imports slangspec (face)",
        "slangspec.runtime.synthetic (runtime) imports slangspec.aot.warm (aot)",
    ]
    assert against_the_flow(synthetic, "slangspec.__main__") == []
    below = tmp_path / "below.py"
    below.write_text("from .specializer import FunctionInfo\nfrom .errors import Error\n")
    assert against_the_flow(below, "slangspec.settings") == [
        "slangspec.settings (foundation) imports slangspec.specializer (specializer)"
    ]
    beside = tmp_path / "beside.py"
    beside.write_text("from ..signatures.text import format_arg\nfrom ..settings import setting\n")
    assert against_the_flow(beside, "slangspec.cache_store.synthetic") == [
        "slangspec.cache_store.synthetic (cache_store) imports slangspec.signatures.text "
        "(signatures)"
    ]


def test_no_module_imports_one_that_imports_it_back():
    graph = {name: slangspec_imports(path) for name, path in MODULES.items()}
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle_however_long():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_import_walk_sees_relative_lazy_and_type_checking_imports():
    lazy = imported(SRC / "runtime" / "module.py")
    assert "slangspec.runtime.traced" in lazy, "imported inside a method"
    typed = slangspec_imports(SRC / "runtime" / "launch.py")
    assert "slangspec.runtime.cuda_call" in typed, "imported for type checking and lazily"
    assert "slangspec.runtime.cache" in imported(SRC / "runtime" / "module_base.py")
