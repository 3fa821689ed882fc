#!/usr/bin/env python3
"""Renders a crate's public API from rustdoc's JSON, one item a line, sorted.

Usage: public_api.py CRATE.json > api.txt

Each line is an item a dependent can name (by every public path it has), with its signature:
modules, structs and their public fields, enums and their variants, traits and their items,
functions and methods, constants, statics, type aliases, re-exported crates, and the trait
impls of each public type (derives included, auto traits and blanket impls left out). A last
section lists types that appear in public signatures but cannot be named from outside (a type
declared `pub` in a private module and not re-exported): each is an API bug to fix.

Written for the rustdoc JSON of the toolchain CI runs (format_version is printed to stderr);
field names that changed between versions are read either way.
"""

import json
import sys


def main() -> None:
    doc = json.load(open(sys.argv[1]))
    index = doc["index"]
    root = doc["root"]
    root_id = str(root)
    crate = index[root_id]["name"]
    print(f"rustdoc JSON format_version {doc.get('format_version')}", file=sys.stderr)
    lines: set[str] = set()
    reachable: set[str] = set()
    used: dict[str, str] = {}

    def item(i):
        return index.get(str(i))

    def ty(t) -> str:
        if t is None:
            return "()"
        if not isinstance(t, dict):
            return str(t)
        (kind, v), = t.items()
        if kind == "resolved_path":
            name = v.get("path") or v.get("name") or ""
            name = name.split("::")[-1]
            if v.get("id") is not None:
                used.setdefault(str(v["id"]), name)
            return name + args(v.get("args"))
        if kind == "primitive":
            return v
        if kind == "generic":
            return v
        if kind == "tuple":
            return "(" + ", ".join(ty(x) for x in v) + ")"
        if kind == "slice":
            return "[" + ty(v) + "]"
        if kind == "array":
            return "[" + ty(v["type"]) + "; " + str(v["len"]) + "]"
        if kind == "borrowed_ref":
            lt = v.get("lifetime")
            mut = v.get("is_mutable", v.get("mutable"))
            return "&" + (lt + " " if lt else "") + ("mut " if mut else "") + ty(v["type"])
        if kind == "raw_pointer":
            mut = v.get("is_mutable", v.get("mutable"))
            return ("*mut " if mut else "*const ") + ty(v["type"])
        if kind == "dyn_trait":
            parts = [poly(p) for p in v.get("traits", [])]
            if v.get("lifetime"):
                parts.append(v["lifetime"])
            return "dyn " + " + ".join(parts)
        if kind == "impl_trait":
            return "impl " + " + ".join(bound(b) for b in v)
        if kind == "qualified_path":
            trait = v.get("trait")
            tname = ty({"resolved_path": trait}) if trait else ""
            return "<" + ty(v["self_type"]) + (" as " + tname if tname else "") + ">::" + v["name"]
        if kind == "function_pointer":
            sig = v.get("sig") or v.get("decl") or {}
            return "fn(" + ", ".join(ty(x[1]) for x in sig.get("inputs", [])) + ")" + ret(sig.get("output"))
        if kind == "infer":
            return "_"
        return kind

    def poly(p) -> str:
        return ty({"resolved_path": p["trait"]})

    def bound(b) -> str:
        if "trait_bound" in b:
            tb = b["trait_bound"]
            mod = tb.get("modifier")
            return ("?" if mod == "maybe" else "") + ty({"resolved_path": tb["trait"]})
        if "outlives" in b:
            return b["outlives"]
        if "use" in b:
            return "use<..>"
        return str(b)

    def args(a) -> str:
        if not a:
            return ""
        if "angle_bracketed" in a:
            ab = a["angle_bracketed"]
            out = []
            for x in ab.get("args", []):
                (k, v), = x.items() if isinstance(x, dict) else (("other", x),)
                if k == "type":
                    out.append(ty(v))
                elif k == "lifetime":
                    out.append(v)
                elif k == "const":
                    out.append(str(v.get("expr", v)))
                else:
                    out.append("_")
            for c in ab.get("constraints", ab.get("bindings", [])):
                binding = c.get("binding", {})
                if "equality" in binding:
                    eq = binding["equality"]
                    out.append(c["name"] + " = " + (ty(eq["type"]) if "type" in eq else str(eq)))
                elif "constraint" in binding:
                    out.append(c["name"] + ": " + " + ".join(bound(b) for b in binding["constraint"]))
            return "<" + ", ".join(out) + ">" if out else ""
        if "parenthesized" in a:
            p = a["parenthesized"]
            return "(" + ", ".join(ty(x) for x in p.get("inputs", [])) + ")" + ret(p.get("output"))
        return ""

    def ret(o) -> str:
        return "" if o is None else " -> " + ty(o)

    def generics(g) -> str:
        if not g:
            return ""
        out = []
        for p in g.get("params", []):
            kind = p.get("kind", {})
            if "lifetime" in kind:
                out.append(p["name"])
            elif "type" in kind:
                if kind["type"].get("is_synthetic", kind["type"].get("synthetic")):
                    continue
                bounds = kind["type"].get("bounds", [])
                out.append(p["name"] + (": " + " + ".join(bound(b) for b in bounds) if bounds else ""))
            elif "const" in kind:
                out.append("const " + p["name"] + ": " + ty(kind["const"]["type"]))
        return "<" + ", ".join(out) + ">" if out else ""

    def fn_sig(name: str, f) -> str:
        sig = f.get("sig") or f.get("decl")
        header = f.get("header", {})
        quals = ""
        if header.get("is_const", header.get("const")):
            quals += "const "
        if header.get("is_async", header.get("async")):
            quals += "async "
        if header.get("is_unsafe", header.get("unsafe")):
            quals += "unsafe "
        params = []
        for pname, pty in sig["inputs"]:
            if pname == "self":
                params.append(ty(pty).replace("Self", "self") if ty(pty) in ("Self",) else "self: " + ty(pty))
            else:
                params.append(pname + ": " + ty(pty))
        params = [p if p != "self: &Self" else "&self" for p in params]
        params = [p if p != "self: &mut Self" else "&mut self" for p in params]
        return f"{quals}fn {name}{generics(f.get('generics'))}({', '.join(params)}){ret(sig.get('output'))}"

    def add(line: str) -> None:
        lines.add("pub " + line)

    def walk(i, path: str, seen: frozenset) -> None:
        it = item(i)
        if it is None or (str(i), path) in seen:
            return
        seen = seen | {(str(i), path)}
        reachable.add(str(i))
        (kind, v), = it["inner"].items() if isinstance(it["inner"], dict) else ((it["inner"], None),)
        if kind == "module":
            add(f"mod {path}")
            for c in v["items"]:
                child = item(c)
                if child is None:
                    continue
                ck = next(iter(child["inner"])) if isinstance(child["inner"], dict) else child["inner"]
                if ck in ("use", "import"):
                    u = child["inner"][ck]
                    target = u.get("id")
                    if u.get("is_glob", u.get("glob")):
                        t = item(target) if target is not None else None
                        if t is not None and "module" in t["inner"]:
                            for g in t["inner"]["module"]["items"]:
                                gi = item(g)
                                if gi is not None and gi.get("name"):
                                    walk(g, f"{path}::{gi['name']}", seen)
                        continue
                    if target is not None and item(target) is not None:
                        walk(target, f"{path}::{u['name']}", seen)
                    else:
                        add(f"use {path}::{u['name']} (= {u['source']})")
                elif child.get("name"):
                    walk(c, f"{path}::{child['name']}", seen)
        elif kind == "struct":
            add(f"struct {path}{generics(v.get('generics'))}")
            sk = v["kind"]
            if isinstance(sk, dict) and "plain" in sk:
                for f in sk["plain"]["fields"]:
                    fi = item(f)
                    if fi is not None:
                        add(f"field {path}::{fi['name']}: {ty(fi['inner']['struct_field'])}")
            elif isinstance(sk, dict) and "tuple" in sk:
                for n, f in enumerate(sk["tuple"]):
                    fi = item(f) if f is not None else None
                    if fi is not None:
                        add(f"field {path}::{n}: {ty(fi['inner']['struct_field'])}")
            impls(v.get("impls", []), path)
        elif kind == "enum":
            add(f"enum {path}{generics(v.get('generics'))}")
            for var in v["variants"]:
                vi = item(var)
                if vi is None:
                    continue
                vk = vi["inner"]["variant"]["kind"]
                shape = ""
                if isinstance(vk, dict) and "tuple" in vk:
                    shape = "(" + ", ".join(
                        ty(item(f)["inner"]["struct_field"]) if f is not None and item(f) else "_"
                        for f in vk["tuple"]) + ")"
                elif isinstance(vk, dict) and "struct" in vk:
                    shape = " { " + ", ".join(
                        item(f)["name"] + ": " + ty(item(f)["inner"]["struct_field"])
                        for f in vk["struct"]["fields"] if item(f)) + " }"
                add(f"variant {path}::{vi['name']}{shape}")
            impls(v.get("impls", []), path)
        elif kind == "union":
            add(f"union {path}")
            impls(v.get("impls", []), path)
        elif kind == "trait":
            add(f"trait {path}{generics(v.get('generics'))}")
            for t in v["items"]:
                ti = item(t)
                if ti is None:
                    continue
                tk, tv = next(iter(ti["inner"].items()))
                if tk == "function":
                    add(f"trait-fn {path}::{fn_sig(ti['name'], tv)}")
                elif tk == "assoc_type":
                    add(f"trait-type {path}::{ti['name']}")
                elif tk == "assoc_const":
                    add(f"trait-const {path}::{ti['name']}: {ty(tv['type'])}")
        elif kind == "function":
            add(f"{fn_sig(path, v)}")
        elif kind == "constant":
            add(f"const {path}: {ty(v['type'])}")
        elif kind == "static":
            add(f"static {path}: {ty(v['type'])}")
        elif kind == "type_alias":
            add(f"type {path}{generics(v.get('generics'))} = {ty(v['type'])}")
        elif kind in ("macro", "proc_macro"):
            add(f"macro {path}")
        else:
            add(f"{kind} {path}")

    def impls(ids, path: str) -> None:
        for i in ids:
            im = item(i)
            if im is None:
                continue
            v = im["inner"]["impl"]
            if v.get("is_synthetic", v.get("synthetic")) or v.get("blanket_impl") is not None:
                continue
            trait = v.get("trait")
            if trait is not None:
                neg = "!" if v.get("is_negative", v.get("negative")) else ""
                add(f"impl {neg}{ty({'resolved_path': trait})} for {path}{generics(v.get('generics'))}")
                continue
            for m in v["items"]:
                mi = item(m)
                if mi is None or mi.get("visibility") != "public":
                    continue
                mk, mv = next(iter(mi["inner"].items()))
                if mk == "function":
                    add(f"{fn_sig(path + '::' + mi['name'], mv)}")
                elif mk == "assoc_const":
                    add(f"const {path}::{mi['name']}: {ty(mv['type'])}")

    walk(root_id, crate, frozenset())
    paths = doc.get("paths", {})

    def local(i: str) -> bool:
        known = index.get(i) or paths.get(i) or {}
        return known.get("crate_id") == 0

    for line in sorted(lines):
        print(line)
    names = sorted({used[i] for i in used if local(i) and i not in reachable})
    if names:
        print()
        print("# Named in public signatures but not reachable from outside (fix these):")
        for n in names:
            print(f"# unnameable {n}")


if __name__ == "__main__":
    main()
