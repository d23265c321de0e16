"""What the hostile-input tests and the torture benchmark share: a module with functions of
every kind a name can reach, and names broken the ways a hostile or careless caller breaks
them."""

import random

SOURCE = """
import slangpy;
void out1(float a, float b, out float r) { r = a * b + 1; }
[Differentiable] float poly(float a, float x) { return a * x * x + x; }
float gadd<let N : int>(float a) { return a + N; }
T gmul<T : IFloat>(T a, T b) { return a * b; }
struct Pair { float x; float y; };
void skips(float a, out float r) { }
void skips_field(float a, out Pair p) { p.x = a; }
void skips_some(float a, out float r) { if (a > 0) r = a; }
"""

ISSUE_NAMES = [
    "gadd<3>>",
    "poly>",
    "gadd<3><3>",
    "gadd<(3)>",
    "gadd<3>()",
    "poly(1.0,2.0);//X",
    "out1;_out0[0]=1000.0;//",
    "out1;",
    "out1;;",
    "out1;{}",
    "poly\nvoid X(){}",
]


def mangled_names(count: int = 240) -> list[str]:
    """Function names broken the ways a hostile or careless caller breaks them: unbalanced
    brackets, call expressions, statements, comments, whitespace, other characters."""
    rng = random.Random(1234)
    bases = ["out1", "poly", "gadd<3>", "gmul<float>", "gadd", "gmul"]
    breaks = [
        ">",
        "<",
        ">>",
        "<<",
        "<3><3>",
        "()",
        "(1.0, 2.0)",
        ";",
        ";;",
        ";{}",
        ";_out0[0]=1000.0;//",
        "//",
        "/*",
        "*/",
        "\n",
        "\nvoid X(){}",
        "\t;",
        "[0]",
        ".x",
        "::y",
        "#",
        "\\",
        '"',
        "'",
        "`",
        "$",
        "@",
        "\x00",
        "\u00e9",
        "+1",
        "-",
        "= 0",
        ",",
        "<(3)>",
        "<3,>",
        "<,3>",
        "<3;>",
        "<float;>",
        "<>()",
        "{",
        "}",
    ]
    names: set[str] = set()
    while len(names) < count:
        base = rng.choice(bases)
        parts = [base]
        for _ in range(rng.randint(1, 3)):
            piece = rng.choice(breaks)
            at = rng.randint(0, len(parts))
            parts.insert(at, piece)
        names.add("".join(parts))
    return sorted(names)
