"""The files of a run named on the command line, read and written for `wspc run` and `wspc
tune` (cli.py holds the options; this module what they name): each input read as an untrusted
file within the memory limit, each name checked against the module before anything runs, every
output written after a successful run or none (`files.Staged`), and the `--stats` text. A
problem is a `Diagnostic` at the option or the file that names it, never a traceback.
"""

from __future__ import annotations


def at(where: str):
    """The span of a diagnostic about a command-line option or a file, not a source line."""
    from .spans import Span

    return Span(where, 0, 0, 0, 0)


def check_source(path: str, what: str) -> None:
    """A file read whole (the module, a machine) is a regular file: a FIFO would block, a
    device might never end."""
    from .diagnostics import Diagnostic, WspError
    from .files import FileError, check_regular

    try:
        check_regular(path)
    except FileError as err:
        raise WspError([Diagnostic(at(path), "io", f"cannot read {what}: {err.message}")]) from None


def check_names(program, binds, inputs, outputs) -> None:
    """Every name on the command line is a sym or a tensor of the right kind, before any file
    is read or anything runs: an unknown name is reported at the option naming it."""
    from .diagnostics import Diagnostic, WspError, did_you_mean

    m = program.module
    syms = {s.name for s in m.syms}
    tensors = {t.name: t for t in m.tensors}
    diags = []
    for pair in binds:
        if pair.name not in syms:
            diags.append(Diagnostic(at(pair.where), "binding",
                                    f"`{pair.name}` is not a sym of module `{m.name}`",
                                    did_you_mean(pair.name, syms)))
    def unknown(pair) -> Diagnostic:
        return Diagnostic(at(pair.where), "binding",
                          f"`{pair.name}` is not a tensor of module `{m.name}`",
                          did_you_mean(pair.name, tensors))

    for pair in inputs:
        t = tensors.get(pair.name)
        if t is None:
            diags.append(unknown(pair))
        elif t.kind not in ("input", "inout"):
            diags.append(Diagnostic(t.span, "binding", f"`{t.name}` is {an(t.kind)}; it takes "
                                    "no input array", "pass inputs and inouts only"))
    for pair in outputs:
        t = tensors.get(pair.name)
        if t is None:
            diags.append(unknown(pair))
        elif t.kind not in ("output", "inout"):
            diags.append(Diagnostic(t.span, "io", f"`{t.name}` is {an(t.kind)}, not an output",
                                    "--output names outputs and inouts"))
    if diags:
        raise WspError(diags, dict(m.sources))


def an(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def write_trace_json(program):
    """What `--trace` writes: the trace's Chrome JSON."""
    data = program.trace.to_json().encode("utf-8")
    return lambda fh: fh.write(data)


def stats_lines(info: dict) -> list[str]:
    """The text `--stats` prints, a line each."""
    out: list[str] = []
    for k in ("task_count", "compile_time_ms", "execute_time_ms", "runtime_ms", "workers",
              "dependencies", "max_in_flight", "batches", "total_cycles", "critical_path_cycles",
              "simulated_us"):
        if k in info:
            v = info[k]
            out.append(f"{k:>20}: {round(v, 3) if isinstance(v, float) else v}")
    for unit, u in info.get("utilisation", {}).items():
        out.append(f"{unit + ' utilisation':>20}: {u * 100:.1f}%")
    if "devices" in info:  # a mesh: the interconnect (docs/running.md)
        out.append(f"{'devices':>20}: {info['devices']}")
        out.append(f"{'communication':>20}: {info['comm_us']:.3f} us on the comm engines "
                   f"({info['comm_cycles']} cycles)")
    for c in info.get("collectives", []):
        out.append(f"{'collective':>20}: {c['collective']}: {c['bytes']} bytes in "
                   f"{c['messages']} messages ({c['algorithm']}), {c['modelled_us']:.3f} us")
    for name, c in info.get("channels", {}).items():  # CSP (docs/csp.md, "Run information")
        out.append(f"{'channel ' + name:>20}: {c['items']} items, at most {c['max_in_flight']} "
                   f"in flight (depth {c['depth']})")
    for name, e in info.get("events", {}).items():
        out.append(f"{'event ' + name:>20}: {e['records']} records, {e['synchronizes']} "
                   "synchronizes")
    disp = info.get("dispatchers", [])
    if disp:
        total = info.get("total_cycles") or 1
        out.append(f"{'dispatcher':>12} {'tasks':>10} {'stolen':>8} {'busy':>7}")
        for d in disp:
            out.append(f"{d['dispatcher']:>12} {d['tasks']:>10} {d['stolen']:>8} "
                       f"{d['busy_cycles'] / total * 100:>6.1f}%")
    if info.get("kernels"):
        from .backends.profile import table_lines

        out.append("per kernel, by real time:")
        for line in table_lines(info["kernels"]):
            out.append(line)
    return out


def read_inputs(program, inputs, inputs_npz, limit):
    """The arrays named on the command line, read as untrusted files (`files.read_npy`,
    `read_npz`) within the memory `limit`; an unreadable file is a diagnostic at the tensor
    (`--input`) or at the file (`--inputs`)."""
    from .diagnostics import Diagnostic, WspError
    from .files import FileError, read_npy, read_npz

    m = program.module
    tensors = {t.name: t for t in m.tensors}
    arrays, sources, diags = {}, {}, []
    left = limit.bytes
    if inputs_npz:
        try:
            arrays = read_npz(inputs_npz, left, limit.what)
        except FileError as err:
            diags.append(Diagnostic(at(inputs_npz), "io", err.message))
        for name, a in arrays.items():
            sources[name] = f"{inputs_npz}[{name}]"
            left -= a.nbytes
            if name not in tensors:
                diags.append(Diagnostic(at(inputs_npz), "binding",
                                        f"`{name}` (in {inputs_npz}) is not a tensor of module "
                                        f"`{m.name}`"))
    for p in inputs:
        if p.name in arrays:
            diags.append(Diagnostic(at(p.where), "binding", f"`{p.name}` is also in {inputs_npz}",
                                    "give each tensor one array"))
            continue
        try:
            arrays[p.name] = read_npy(p.value, left, limit.what)
        except FileError as err:
            diags.append(Diagnostic(tensors[p.name].span, "io",
                                    f"cannot read {p.value} for `{p.name}`: {err.message}"))
            continue
        sources[p.name] = p.value
        left -= arrays[p.name].nbytes
    if diags:
        raise WspError(diags, dict(m.sources))
    return arrays, sources


def write_outputs(program, results, outputs, outputs_npz, trace_file, trace_write=None,
                   report_file=None, report_write=None) -> None:
    """Write every requested file after a successful run, all or none (`files.Staged`); a
    file that cannot be written is reported at the option naming it."""
    import numpy as np

    from .diagnostics import Diagnostic, WspError
    from .files import FileError, Staged

    def save(path, content, npz=False):
        if npz or str(path).endswith(".npz"):
            return lambda fh: np.savez(fh, **content)
        return lambda fh: np.save(fh, next(iter(content.values())))

    try:
        with Staged() as staged:
            for p in outputs:
                staged.add(p.value, save(p.value, {p.name: results[p.name]}), p.where)
            if outputs_npz:
                staged.add(outputs_npz, save(outputs_npz, dict(results), npz=True),
                           f"--outputs {outputs_npz}")
            if trace_file:
                staged.add(trace_file, trace_write or write_trace_json(program),
                           f"--trace {trace_file}")
            if report_file:
                staged.add(report_file, report_write, f"--report {report_file}")
            staged.commit()
    except FileError as err:
        raise WspError([Diagnostic(at(err.where), "io", err.message)]) from None
