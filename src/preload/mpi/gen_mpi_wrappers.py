#!/usr/bin/env python3
"""Generates parmon's MPI wrappers (C and Fortran) from the MPI library's own prototypes.

Input: the installed mpi.h run through the C preprocessor (the MPI's compiler wrapper flags), which
is the authoritative list of the C prototypes this MPI provides; every `PMPI_Xxx` declared there
gets a wrapper `MPI_Xxx` with exactly that signature, so the file compiles against OpenMPI and
MPICH alike and covers whatever MPI-3.1/MPI-4 functions the library has. Checked-in input:
mpi_functions.txt, the MPI-3.1 and MPI-4.0 function names, used to print which standard functions
this MPI lacks (they cannot be called, so there is nothing to wrap).

What a wrapper records beyond MpiEnter/MpiLeave is chosen by the function's name from the table
SEMANTICS in mpi_semantics.py, with arguments addressed by position (the standard fixes the order;
parameter names differ between implementations). Fortran wrappers (mpi_xxx_, mpi_xxx__, and OpenMPI's
ompi_xxx_f used by its mpi_f08 module) convert handles with the PMPI_*_f2c functions and call the
same hooks, then the Fortran PMPI entry point pmpi_xxx_.

Output: mpi_wrappers.inc (included by mpi_wrappers.cc) and mpi_weak.h (weak references to every
PMPI function and MPI data symbol, so the library loads into programs that are not MPI programs).
"""
import re
import sys

sys.dont_write_bytecode = True  # the generator runs from the source tree: leave no __pycache__
from mpi_semantics import COLL, NO_FORTRAN, SEMANTICS, SKIP, nonblocking_name  # noqa: E402


def strip_attributes(text):
    out = []
    i = 0
    while True:
        j = text.find("__attribute__", i)
        if j < 0:
            out.append(text[i:])
            break
        out.append(text[i:j])
        k = text.index("(", j)
        depth = 0
        while True:
            if text[k] == "(":
                depth += 1
            elif text[k] == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        i = k + 1
    return "".join(out)


def split_params(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


class Param:
    def __init__(self, text, index):
        self.text = text
        m = re.match(r"^(.*?)(\w+)\s*((?:\[[^\]]*\])*)$", text)
        if not m or text in ("void", "...") or not m.group(1).strip():
            self.name = "a%d" % index
            self.decl = text + " " + self.name if text not in ("...",) else text
            self.type = text
        else:
            self.name = m.group(2)
            self.decl = text
            self.type = (m.group(1) + m.group(3)).strip()
        self.is_string = re.match(r"^(const\s+)?char\s*\*$", self.type.replace(" ", " ")) is not None


def parse(preprocessed):
    text = strip_attributes(preprocessed)
    text = re.sub(r"\s+", " ", text)
    funcs, data = {}, set()
    for stmt in text.split(";"):
        stmt = stmt.strip()
        m = re.match(r"^(?:extern )?([\w ]+?\**) ?\bPMPI_(\w+) ?\((.*)\)$", stmt)
        if m:
            ret, name, params = m.group(1).strip(), m.group(2), m.group(3).strip()
            if ret.startswith("typedef"):
                continue
            plist = [] if params in ("", "void") else split_params(params)
            funcs[name] = (ret, [Param(p, i) for i, p in enumerate(plist)])
            continue
        # MPI data symbols (OpenMPI's predefined handles are addresses of these).
        m = re.match(r"^(?:.*\s)?extern [^()]*?\b(\w+)\s*(\[\w*\])?$", stmt)
        if m and "typedef" not in stmt:
            data.add(m.group(1))
    return funcs, data


def value_expr(kind, p, fortran):
    """C expression giving the argument's value as the hook wants it."""
    n = p.name
    f = "(*(const MPI_Fint*)%s)" % n
    if kind == "int":
        return "static_cast<int>(%s)" % f if fortran else n
    if kind == "intout":
        return "static_cast<int>(%s)" % f if fortran else "*" + n
    if kind == "ptr":
        return "static_cast<const void*>(%s)" % n
    if kind == "type":
        return "PMPI_Type_f2c(%s)" % f if fortran else n
    if kind == "comm":
        return "PMPI_Comm_f2c(%s)" % f if fortran else n
    if kind == "file":
        return "PMPI_File_f2c(%s)" % f if fortran else n
    if kind == "win":
        return "PMPI_Win_f2c(%s)" % f if fortran else n
    if kind == "intarr":
        return "reinterpret_cast<const int*>(%s)" % n
    if kind == "typearr":
        return ("pm::TypeArray{nullptr, reinterpret_cast<const MPI_Fint*>(%s)}" % n if fortran
                else "pm::TypeArray{%s, nullptr}" % n)
    raise ValueError(kind)


class _Body:
    """One wrapper's statements being built: lines before the real call, substitutions for the
    real call's arguments (status out-parameters), and lines after it. Hook handlers fill it."""

    def __init__(self, params, sem, fortran):
        self.params = params
        self.sem = sem
        self.args = sem[1] if sem else []
        self.fortran = fortran
        self.lang = "true" if fortran else "false"
        self.a = {}
        for spec in self.args:
            pos, kind = spec.split(":")
            self.a.setdefault(kind, []).append(params[int(pos)])
        self.lines = []
        self.subst = {}
        self.post = []

    def V(self, kind, i=0):
        return value_expr(kind, self.a[kind][i], self.fortran)

    def handle(self, p, what):
        """The C handle an MPI_<what> out/in parameter holds (Fortran passes an MPI_Fint)."""
        return ("PMPI_%s_f2c(*static_cast<const MPI_Fint*>(%s))" % (what, p.name) if self.fortran
                else "*%s" % p.name)

    def req_value(self, p):
        return self.handle(p, "Request")

    def status_arg(self, p):
        """Makes the real call write its status somewhere even under MPI_STATUS_IGNORE."""
        if self.fortran:
            self.lines.append("MPI_Fint fst_local[pm::kFortranStatusInts];")
            self.lines.append("MPI_Fint* fst = pm::FortranStatusIgnored(%s) ? fst_local : "
                              "static_cast<MPI_Fint*>(%s);" % (p.name, p.name))
            self.subst[p.name] = "fst"
        else:
            self.lines.append("MPI_Status st_local;")
            self.lines.append("MPI_Status* st = %s == MPI_STATUS_IGNORE ? &st_local : %s;" %
                              (p.name, p.name))
            self.subst[p.name] = "st"

    def completion(self, count, p):
        self.lines.append("pm::Completion done(%s, %s);" % (count, (
            "nullptr, static_cast<const MPI_Fint*>(%s)" % p.name if self.fortran
            else p.name + ", nullptr")))


def _hook_send(b, hook):
    b.lines.append("pm::OnSend(c, %s, %s, %s, %s, %s, 0);" % (b.V("int", 0), b.V("type"),
                                                            b.V("int", 1), b.V("int", 2),
                                                            b.V("comm")))


def _hook_new_send(b, hook):
    b.post.append("if (rc == MPI_SUCCESS) pm::OnNewSend(c, %s, %s, %s, %s, %s, %s, %s);" % (
        b.req_value(b.a["reqout"][0]), b.V("int", 0), b.V("type"), b.V("int", 1), b.V("int", 2),
        b.V("comm"), "true" if hook == "send_init" else "false"))


def _hook_new_recv(b, hook):
    b.post.append("if (rc == MPI_SUCCESS) pm::OnNewRecv(c, %s, %s, %s);" % (
        b.req_value(b.a["reqout"][0]), b.V("comm"), "true" if hook == "recv_init" else "false"))


def _hook_recv(b, hook):
    b.status_arg(b.a["status"][0])
    b.post.append("if (rc == MPI_SUCCESS) pm::OnRecvDone(c, c.t0, %s, %s, 0);" % (
        b.V("comm"), status_value_deferred(b.fortran)))


def _hook_sendrecv(b, hook):
    _hook_send(b, hook)
    _hook_recv(b, hook)


def _hook_mprobe(b, hook):
    b.post.append("if (rc == MPI_SUCCESS) pm::OnMessage(%s, %s);" % (
        b.handle(b.a["msgout"][0], "Message"), b.V("comm")))


def _take_message(b):
    b.lines.append("MPI_Comm mcomm = pm::TakeMessage(%s);" % b.handle(b.a["msgin"][0], "Message"))


def _hook_mrecv(b, hook):
    _take_message(b)
    b.status_arg(b.a["status"][0])
    b.post.append("if (rc == MPI_SUCCESS) pm::OnRecvDone(c, c.t0, mcomm, %s, 0);" %
                  status_value_deferred(b.fortran))


def _hook_imrecv(b, hook):
    _take_message(b)
    b.post.append("if (rc == MPI_SUCCESS) pm::OnNewRecv(c, %s, mcomm, false);" %
                  b.req_value(b.a["reqout"][0]))


def _hook_start(b, hook):
    b.post.append("if (rc == MPI_SUCCESS) pm::OnStart(c, %s);" % b.req_value(b.a["reqin"][0]))


def _hook_startall(b, hook):
    p = b.a["reqarr"][0]
    b.post.append("if (rc == MPI_SUCCESS) pm::OnStartAll(c, %s, %s, %s);" % (
        b.V("int"), "nullptr" if b.fortran else p.name,
        "static_cast<const MPI_Fint*>(%s)" % p.name if b.fortran else "nullptr"))


def _hook_wait_one(b, hook):
    """MPI_Wait, MPI_Test, MPI_Request_free: one request."""
    b.completion(1, b.a["reqin"][0])
    if hook == "request_free":
        b.post.append("if (rc == MPI_SUCCESS) done.Freed(c, 0);")
        return
    b.status_arg(b.a["status"][0])
    cond = "rc == MPI_SUCCESS" if hook == "wait" else (
        "rc == MPI_SUCCESS && %s" % value_expr("intout", b.a["intout"][0], b.fortran))
    b.post.append("if (%s) done.Done(c, 0, %s);" % (cond, status_value_deferred(b.fortran)))


def _hook_wait_array(b, hook):
    """MPI_Waitall, MPI_Testall, MPI_Waitsome: a request array and a status array."""
    b.completion(b.V("int"), b.a["reqarr"][0])
    sp = b.a["statusarr"][0]
    b.lines.append("pm::StatusArray sa(%s, %s, %s);" % (b.V("int"), sp.name, b.lang))
    b.subst[sp.name] = "sa.arg()" if b.fortran else "static_cast<MPI_Status*>(sa.arg())"
    if hook == "waitall":
        b.post.append("if (rc == MPI_SUCCESS) done.All(c, sa);")
    elif hook == "testall":
        b.post.append("if (rc == MPI_SUCCESS && %s) done.All(c, sa);" %
                      value_expr("intout", b.a["intout"][0], b.fortran))
    else:
        b.post.append("if (rc == MPI_SUCCESS) done.Some(c, %s, %s, sa, %s);" % (
            value_expr("intout", b.a["intout"][0], b.fortran),
            "reinterpret_cast<const int*>(%s)" % b.a["intarrout"][0].name, b.lang))


def _hook_wait_any(b, hook):
    """MPI_Waitany, MPI_Testany: a request array, one index and one status out."""
    b.completion(b.V("int"), b.a["reqarr"][0])
    b.status_arg(b.a["status"][0])
    idx = value_expr("intout", b.a["intout"][0], b.fortran)
    flag = "true" if hook == "waitany" else value_expr("intout", b.a["intout"][1], b.fortran)
    b.post.append("if (rc == MPI_SUCCESS && %s) done.Any(c, %s, %s, %s);" % (
        flag, idx, status_value_deferred(b.fortran), b.lang))


def _hook_coll(b, hook):
    shape = hook[5:]
    vals = []
    counters = {}
    for spec in b.args:
        pos, kind = spec.split(":")
        i = counters.get(kind, 0)
        counters[kind] = i + 1
        vals.append(value_expr(kind, b.a[kind][i], b.fortran))
    req = b.sem[2] if len(b.sem) > 2 else None
    if req is None:
        b.lines.append("pm::OnCollective(c, pm::Coll::k_%s, 0, %s);" % (shape, ", ".join(vals)))
    else:
        b.post.append("if (rc == MPI_SUCCESS) pm::OnCollective(c, pm::Coll::k_%s, "
                      "pm::NewCollRequest(c, %s), %s);" % (shape, b.req_value(b.params[req]),
                                                           ", ".join(vals)))


def _hook_rma(b, hook):
    b.post.append("if (rc == MPI_SUCCESS) pm::OnRma(c, %s, %s, %s, %s);" % (
        b.V("int", 0), b.V("type"), b.V("int", 1), b.V("win")))


def _hook_rma1(b, hook):
    b.post.append("if (rc == MPI_SUCCESS) pm::OnRma(c, 1, %s, %s, %s);" % (
        b.V("type"), b.V("int"), b.V("win")))


def _hook_newcomm(b, hook):
    b.post.append("if (rc == MPI_SUCCESS) pm::OnNewComm(%s);" % b.handle(b.a["commout"][0], "Comm"))


def _hook_comm_free(b, hook):
    b.lines.append("pm::OnCommFree(%s);" % b.handle(b.a["commin"][0], "Comm"))


def _hook_io(b, hook):
    b.post.append("if (rc == MPI_SUCCESS) pm::OnIo(c, %s, %s, %s);" % (b.V("file"), b.V("int"),
                                                                       b.V("type")))


def _hook_none(b, hook):
    pass


_HOOKS = {
    "plain": _hook_none, "init": _hook_none, "finalize": _hook_none,
    "send": _hook_send, "isend": _hook_new_send, "send_init": _hook_new_send,
    "irecv": _hook_new_recv, "recv_init": _hook_new_recv, "recv": _hook_recv,
    "sendrecv": _hook_sendrecv, "mprobe": _hook_mprobe, "mrecv": _hook_mrecv,
    "imrecv": _hook_imrecv, "start": _hook_start, "startall": _hook_startall,
    "wait": _hook_wait_one, "test": _hook_wait_one, "request_free": _hook_wait_one,
    "waitall": _hook_wait_array, "testall": _hook_wait_array, "waitsome": _hook_wait_array,
    "waitany": _hook_wait_any, "testany": _hook_wait_any,
    "rma": _hook_rma, "rma1": _hook_rma1, "newcomm": _hook_newcomm,
    "comm_free": _hook_comm_free, "io": _hook_io,
}


def gen_body(name, ret, params, sem, fortran, call_real):
    """Statements of one wrapper between Begin and End; call_real is the real call statement."""
    hook = sem[0] if sem else "plain"
    b = _Body(params, sem, fortran)
    handler = _hook_coll if hook.startswith("coll:") else _HOOKS.get(hook)
    if handler is None:
        raise ValueError(hook)
    handler(b, hook)
    return b.lines, b.subst, b.post


def status_value_deferred(fortran):
    return "pm::CStatus(fst)" if fortran else "st"


def fortran_signature(params):
    """Fortran ABI: every argument by reference, then ierr, then hidden string lengths."""
    decls = ["void* %s" % p.name for p in params]
    decls.append("MPI_Fint* ierr")
    nstr = sum(1 for p in params if p.is_string or "char" in p.type)
    decls += ["size_t len%d" % i for i in range(nstr)]
    call = [p.name for p in params] + ["ierr"] + ["len%d" % i for i in range(nstr)]
    return decls, call


def add_derived_semantics(funcs):
    """Semantics that depend on this MPI: nonblocking/persistent collectives and MPI-IO."""
    # Nonblocking and persistent collectives: the request is the last argument (persistent ones,
    # MPI-4, have an MPI_Info before it).
    for name, (shape, args) in COLL.items():
        for variant in (nonblocking_name(name), name + "_init"):
            if variant in funcs:
                SEMANTICS[variant] = ("coll:" + shape, args, len(funcs[variant][1]) - 1)
        SEMANTICS[name] = ("coll:" + shape, args)
    for n in funcs:
        if (n.startswith("File_read") or n.startswith("File_write") or
                n.startswith("File_iread") or n.startswith("File_iwrite")) and n not in SEMANTICS:
            ps = funcs[n][1]
            # (fh, [offset,] buf, count, datatype, ...)
            bi = 2 if "_at" in n else 1
            if len(ps) <= bi + 2 or "MPI_Datatype" not in ps[bi + 2].type:
                continue  # the *_end halves of split collectives: the bytes were counted at begin
            SEMANTICS[n] = ("io", ["0:file", "%d:int" % (bi + 1), "%d:type" % (bi + 2)])


def emit_c_wrapper(w, idx, n, params, sem):
    args = ", ".join(p.name for p in params)
    decl = ", ".join(p.decl for p in params) or "void"
    w("PARMON_INTERPOSE int MPI_%s(%s) {" % (n, decl))
    w("  pm::Call c;")
    w("  if (!pm::Begin(&c, %d)) return PMPI_%s(%s);" % (idx, n, args))
    if sem and sem[0] == "init":
        w("  int rc = PMPI_%s(%s);" % (n, args))
        w("  pm::OnInit(c, rc);")
    elif sem and sem[0] == "finalize":
        w("  pm::OnFinalize(c);")
        w("  int rc = PMPI_%s(%s);" % (n, args))
    else:
        lines, subst, post = gen_body(n, "int", params, sem, False, None)
        for l in lines:
            w("  " + l)
        cargs = ", ".join(subst.get(p.name, p.name) for p in params)
        w("  int rc = PMPI_%s(%s);" % (n, cargs))
        for l in post:
            w("  " + l)
    w("  return pm::End(&c, rc);")
    w("}")


def emit_fortran_wrapper(w, idx, n, params, sem):
    lower = n.lower()
    fdecl, fcall = fortran_signature(params)
    w("extern \"C\" void pmpi_%s_(%s) __attribute__((weak));" % (lower, ", ".join(fdecl)))
    w("static void F_%s(%s) {" % (n, ", ".join(fdecl)))
    w("  pm::Call c;")
    w("  if (!pm::Begin(&c, %d)) { pmpi_%s_(%s); return; }" % (idx, lower, ", ".join(fcall)))
    if sem and sem[0] in ("init", "finalize"):
        if sem[0] == "finalize":
            w("  pm::OnFinalize(c);")
        w("  pmpi_%s_(%s);" % (lower, ", ".join(fcall)))
        if sem[0] == "init":
            w("  pm::OnInit(c, *ierr);")
    else:
        lines, subst, post = gen_body(n, "int", params, sem, True, None)
        for l in lines:
            w("  " + l)
        fargs = [subst.get(p.name, p.name) for p in params] + fcall[len(params):]
        w("  pmpi_%s_(%s);" % (lower, ", ".join(fargs)))
        if post:
            w("  const int rc = *ierr;")
        for l in post:
            w("  " + l)
    w("  pm::End(&c, *ierr);")
    w("}")
    for sym in ("mpi_%s_" % lower, "mpi_%s__" % lower, "ompi_%s_f" % lower):
        w("PARMON_INTERPOSE void %s(%s) { F_%s(%s); }" % (sym, ", ".join(fdecl), n,
                                                        ", ".join(fcall)))


def emit_fortran_init(w, names):
    """Fortran MPI_Init and MPI_Init_thread have their own signatures (no argc/argv)."""
    for sym, fn, params in (("init", "Init", ["MPI_Fint* ierr"]),
                            ("init_thread", "Init_thread",
                             ["MPI_Fint* required", "MPI_Fint* provided", "MPI_Fint* ierr"])):
        if fn not in names:
            continue
        idx = names.index(fn)
        decl = ", ".join(params)
        call = ", ".join(p.split("* ")[1] for p in params)
        w("extern \"C\" void pmpi_%s_(%s) __attribute__((weak));" % (sym, decl))
        w("static void F_%s(%s) {" % (fn, decl))
        w("  pm::Call c;")
        w("  if (!pm::Begin(&c, %d)) { pmpi_%s_(%s); return; }" % (idx, sym, call))
        w("  pmpi_%s_(%s);" % (sym, call))
        w("  pm::OnInit(c, *ierr);")
        w("  pm::End(&c, *ierr);")
        w("}")
        for s in ("mpi_%s_" % sym, "mpi_%s__" % sym, "ompi_%s_f" % sym):
            w("PARMON_INTERPOSE void %s(%s) { F_%s(%s); }" % (s, decl, fn, call))


def gen_wrappers(funcs, names, missing):
    """Text of mpi_wrappers.inc: the name table, then each function's C and Fortran wrappers."""
    out = []
    w = out.append
    w("// Generated by gen_mpi_wrappers.py from the installed mpi.h: do not edit.")
    w("// %d MPI functions wrapped; standard functions this MPI does not provide: %d." % (
        len(names), len(missing)))
    w("#define PARMON_MPI_FUNCTION_COUNT %d" % len(names))
    w("static const char* const kFunctionNames[] = {")
    for n in names:
        w('    "MPI_%s",' % n)
    w("};")
    for idx, n in enumerate(names):
        ret, params = funcs[n]
        sem = SEMANTICS.get(n)
        if ret == "double":
            args = ", ".join(p.name for p in params)
            decl = ", ".join(p.decl for p in params) or "void"
            w("PARMON_INTERPOSE double MPI_%s(%s) { return PMPI_%s(%s); }" % (n, decl, n, args))
            continue
        emit_c_wrapper(w, idx, n, params, sem)
        if NO_FORTRAN.search(n) or any("..." in p.text for p in params):
            continue
        emit_fortran_wrapper(w, idx, n, params, sem)
    emit_fortran_init(w, names)
    return "\n".join(out) + "\n"


def gen_weak(funcs, data):
    """Text of mpi_weak.h."""
    weak = ["// Generated by gen_mpi_wrappers.py: weak references to the MPI library's symbols, so",
            "// libparmon_mpi.so loads into programs without MPI (nothing calls these there).",
            "#pragma once"]
    for n in sorted(funcs):
        weak.append("#pragma weak PMPI_%s" % n)
    for d in sorted(data):
        weak.append("#pragma weak %s" % d)
    return "\n".join(weak) + "\n"


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: gen_mpi_wrappers.py PREPROCESSED_MPI_H MPI_FUNCTIONS_TXT OUT_INC OUT_WEAK_H")
    funcs, data = parse(open(sys.argv[1]).read())
    if "Send" not in funcs:
        sys.exit("gen_mpi_wrappers.py: %s declares no PMPI_Send; is it a preprocessed mpi.h?" %
                 sys.argv[1])
    standard = [l.strip() for l in open(sys.argv[2]) if l.strip() and not l.startswith("#")]
    missing = [n for n in standard if n[4:] not in funcs]
    add_derived_semantics(funcs)
    names = sorted(n for n in funcs if n not in SKIP and funcs[n][0] in ("int", "double"))
    open(sys.argv[3], "w").write(gen_wrappers(funcs, names, missing))
    open(sys.argv[4], "w").write(gen_weak(funcs, data))
    if missing:
        print("gen_mpi_wrappers.py: %d MPI-3.1/4.0 functions are not in this MPI (not wrapped): %s"
              % (len(missing), " ".join(missing[:12]) + (" ..." if len(missing) > 12 else "")))


if __name__ == "__main__":
    main()
