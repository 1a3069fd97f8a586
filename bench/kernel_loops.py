#!/usr/bin/env python3
"""Instruction counts of a kernel's loops, from the disassembly (for CPUs that cannot be timed here: qemu).

    bench/kernel_loops.py OBJDUMP OBJECT FUNCTION_REGEX [MARKER]

Disassembles OBJECT with OBJDUMP (objdump for x86-64, aarch64-linux-gnu-objdump for Arm), takes each function whose
demangled name matches FUNCTION_REGEX, finds its loops (a backward branch and the instructions from its target to
it) that contain the MARKER mnemonic (default: sdot on Arm, vpdpbusd on x86) and no inner loop with it, and prints
each loop's instruction count and the mnemonics it holds most. A one-token kernel's block loop goes once per
weight block of each row group, so its count divided by the rows it takes is the instructions per block and row.
"""
import collections
import re
import subprocess
import sys


def functions(objdump, obj):
    out = subprocess.run([objdump, "-d", "-C", "--no-show-raw-insn", obj], check=True, capture_output=True,
                         text=True).stdout
    name, body = None, []
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            if name:
                yield name, body
            name, body = m.group(1), []
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if m and name:
            body.append((int(m.group(1), 16), m.group(2), m.group(3)))
    if name:
        yield name, body


BRANCH = re.compile(r"^(b(\.\w+)?|cbn?z|tbn?z|j\w+)$")


def loops(body, marker):
    addr_index = {a: i for i, (a, _, _) in enumerate(body)}
    found = []
    for i, (a, mnem, ops) in enumerate(body):
        if not BRANCH.match(mnem):
            continue
        m = re.search(r"\b([0-9a-f]+) <", ops)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target < a and target in addr_index:
            j = addr_index[target]
            found.append((j, i))
    with_marker = [(j, i) for j, i in found if any(body[k][1].startswith(marker) for k in range(j, i + 1))]
    innermost = [(j, i) for j, i in with_marker
                 if not any((j2, i2) != (j, i) and j <= j2 and i2 <= i for j2, i2 in with_marker)]
    return [body[j:i + 1] for j, i in innermost]


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    objdump, obj, regex = sys.argv[1:4]
    marker = sys.argv[4] if len(sys.argv) > 4 else ("sdot" if "aarch64" in objdump else "vpdpbusd")
    pattern = re.compile(regex)
    any_match = False
    for name, body in functions(objdump, obj):
        if not pattern.search(name):
            continue
        any_match = True
        short = re.sub(r"moetier::quant::(kernels::)?(arm::|[A-Za-z_0-9]+::avx2::)?(\(anonymous namespace\)::)?", "",
                       name)
        for loop in loops(body, marker):
            counts = collections.Counter(m for _, m, _ in loop)
            top = ", ".join(f"{m} {c}" for m, c in counts.most_common(8))
            print(f"{len(loop):4d} instructions ({counts[marker] if marker in counts else sum(c for m, c in counts.items() if m.startswith(marker))} {marker}) | {short[:110]} | {top}")
    if not any_match:
        print(f"no function matches {regex}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
