#!/usr/bin/env python3
"""Renders the reference docs' result tables from the benchmarks' results.

Each bench/results/NAME.json is one benchmark run: "metadata" (machine,
date, command) and "rows", as the benchmark wrote them (or, for a run made
before the benchmark wrote results, as the docs quoted them: the metadata
says so). A Markdown file carries NAME's table between two lines:

    <!-- table: NAME -->
    <!-- end table -->

This script writes every such table from its results (the default), or with
--check changes nothing and exits 1 naming each table that differs from its
results, each marker without results and each result no doc shows. The
benchmarks print their tables with the same functions, so a run's printed
table is the one its results render.

    /usr/bin/python3 bench/render_tables.py            # rewrite the docs' tables
    /usr/bin/python3 bench/render_tables.py --check    # docs.tables in ctest
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
RESULTS = os.path.join(ROOT, "bench", "results")
BEGIN = re.compile(r"^<!-- table: ([\w-]+) -->\s*$")
END = "<!-- end table -->"


def three_figures(value):
    """3.84, 6.00, 11.4, 112: three significant figures, trailing zeros kept."""
    return f"{value:#.3g}".rstrip(".")


def embeddings_table(rows):
    """bench/embeddings_bench.py's table: one row a shape, each side's median
    time, kmt's over the faster peer's, kmt's objective's relative
    difference to scikit-learn's and the server's peak resident memory."""
    lines = ["| n × d, k, iterations | kmt | FAISS | scikit-learn | kmt / best peer | "
             "objective vs scikit-learn | server peak RSS |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        best = min(row["faiss_s"], row["sklearn_s"])
        lines.append(
            f"| {row['n']:,} × {row['d']:,}, k = {row['k']:,}, {row['iterations']} | "
            f"{three_figures(row['kmt_s'])} s | {three_figures(row['faiss_s'])} s | "
            f"{three_figures(row['sklearn_s'])} s | {row['kmt_s'] / best:.2f} | "
            f"{row['objective_vs_sklearn']:.1e} | {row['server_peak_rss_gib']:.2f} GiB |")
    return lines


def spread(values, decimals, unit=""):
    """One value, or the range of several."""
    low, high = min(values), max(values)
    if len(values) == 1 or f"{low:.{decimals}f}" == f"{high:.{decimals}f}":
        return f"{values[0]:.{decimals}f}{unit}"
    return f"{low:.{decimals}f}–{high:.{decimals}f}{unit}"


def python_kmeans_workload(row):
    """The name of one of python_kmeans_bench.py's workloads."""
    shape = f"{row['n']:,} × {row['d']} {row['dtype']}, k = {row['k']}"
    if row["workload"] == "whole":
        return f"whole fit, {shape}"
    return f"{row['batches']} batches of {shape}, max_iter = {row['max_iter']}"


def python_kmeans_table(rows):
    """bench/python_kmeans_bench.py's workloads: one row a workload, its
    runs (rounds run one after another) as a range, kmt's time over
    scikit-learn's with the rounds' median."""
    lines = ["| workload | kmt | scikit-learn | kmt's time / scikit-learn's |",
             "|---|---|---|---|"]
    workloads = {}
    for row in rows:
        workloads.setdefault(python_kmeans_workload(row), []).append(row)
    for workload, runs in workloads.items():
        ratios = [run["ratio"] for run in runs]
        label = f"{workload}, median of {runs[0]['repeats']}"
        ratio = f"{ratios[0]:.2f}"
        if len(runs) > 1:
            label += f", {len(runs)} rounds"
            ratio = spread(ratios, 2)
            if "–" in ratio:
                ratio += f" (median {statistics.median(ratios):.2f})"
        lines.append(f"| {label} | {spread([run['kmt_s'] for run in runs], 3, ' s')} | "
                     f"{spread([run['sklearn_s'] for run in runs], 3, ' s')} | {ratio} |")
    return lines


def minibatch_table(rows):
    """bench/minibatch_bench.py's table: one row a shape, each side's median
    time, kmt's over scikit-learn's, and how far kmt's fit is from
    scikit-learn's (the same steps from the same draws)."""
    lines = ["| n × d, k | steps | kmt | scikit-learn | kmt's time / scikit-learn's | "
             "inertia vs scikit-learn | labels equal |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(
            f"| {row['n']:,} × {row['d']}, k = {row['k']}, median of {row['repeats']} | "
            f"{row['steps']} | {row['kmt_s']:.3f} s | {row['sklearn_s']:.3f} s | "
            f"{row['kmt_s'] / row['sklearn_s']:.2f} | {row['inertia_vs_sklearn']:.1e} | "
            f"{100 * row['labels_equal']:.2f}% |")
    return lines


def sparse_workload(row):
    """A sparse_bench row's shape: the rows it replaces in the results."""
    return (row["n"], row["d"], row["k"], row["iterations"])


def sparse_table(rows):
    """bench/sparse_bench.py's table: one row a k, each side's median time,
    kmt's over scikit-learn's, their agreement, what kmt's fit adds to the
    client's resident set and the server's peak, against the matrix's CSR
    and dense bytes."""
    mib = 2 ** 20
    lines = ["| n × d, k, iterations | kmt | scikit-learn | kmt's time / scikit-learn's | "
             "inertia vs scikit-learn | labels equal | the fit's client memory | server peak |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(
            f"| {row['n']:,} × {row['d']:,} ({row['nnz'] / row['n']:.0f} nonzeros a row, "
            f"{row['csr_bytes'] / mib:.0f} MiB as CSR, {row['dense_bytes'] / 2**30:.0f} GiB "
            f"dense), k = {row['k']}, {row['iterations']}, median of {row['repeats']} | "
            f"{row['kmt_s']:.2f} s | {row['sklearn_s']:.2f} s | "
            f"{row['kmt_s'] / row['sklearn_s']:.2f} | {row['inertia_vs_sklearn']:.1e} | "
            f"{100 * row['labels_equal']:.2f}% | {row['client_peak_bytes'] / mib:.0f} MiB | "
            f"{row['server_peak_bytes'] / mib:.0f} MiB |")
    return lines


TABLES = {"embeddings": embeddings_table, "python_kmeans": python_kmeans_table,
          "minibatch": minibatch_table, "sparse": sparse_table}


def machine():
    """The CPU's model name and the cores this process may use."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{len(os.sched_getaffinity(0))} cores of {model}"


def this_run(**metadata):
    """The machine, the UTC date and the command line of this run, and any
    other metadata given (load averages, versions)."""
    return {"machine": machine(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "command": " ".join(["/usr/bin/python3"] + sys.argv), **metadata}


def dump(path, document):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(document, f, indent=2, ensure_ascii=False)
        f.write("\n")


def write_result(path, rows, **metadata):
    """Writes one run's results: its rows and this_run's metadata."""
    dump(path, {"metadata": this_run(**metadata), "rows": rows})


def record_rows(path, rows, key, another_round=False):
    """Adds one run's rows to the results in `path`, each stamped with
    this_run's metadata. A row replaces the earlier rows of its workload
    (the same `key(row)`) unless `another_round`: rounds run one after
    another, so that the machine's drift shows, are kept side by side."""
    document = {"metadata": {}, "rows": []}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
    if not another_round:
        replaced = {key(row) for row in rows}
        document["rows"] = [row for row in document["rows"] if key(row) not in replaced]
    document["rows"] += [{**row, **this_run()} for row in rows]
    dump(path, document)


def results():
    found = {}
    for entry in sorted(os.listdir(RESULTS)):
        if entry.endswith(".json"):
            with open(os.path.join(RESULTS, entry), encoding="utf-8") as f:
                found[entry[:-len(".json")]] = json.load(f)
    return found


def markdown_files():
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                             "*.md"], cwd=ROOT, capture_output=True, text=True, check=True)
    return sorted(p for p in listed.stdout.split() if os.path.isfile(os.path.join(ROOT, p)))


def render(path, available, problems, shown, differing):
    """The file's text with each marked table rendered; records problems,
    the tables shown and, for each table that changes, its first line that
    differs."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        lines = f.read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        match = BEGIN.match(lines[i])
        out.append(lines[i])
        i += 1
        if not match:
            continue
        name = match.group(1)
        end = next((j for j in range(i, len(lines)) if lines[j].strip() == END), None)
        if end is None:
            problems.append(f"{path}: `<!-- table: {name} -->` has no `{END}`")
            continue
        if name not in available:
            problems.append(f"{path}: table {name} has no bench/results/{name}.json")
            out.extend(lines[i:end])
        elif name not in TABLES:
            problems.append(f"{path}: table {name} has no renderer in bench/render_tables.py")
            out.extend(lines[i:end])
        else:
            shown.add(name)
            table = TABLES[name](available[name]["rows"])
            if table != lines[i:end]:
                old = lines[i:end] + [""] * len(table)
                first = next(k for k in range(len(table) + 1)
                             if k == len(table) or table[k] != old[k])
                differing.append((path, name, i + first + 1,
                                  table[first] if first < len(table) else "(no more rows)"))
            out.extend(table)
        i = end
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a doc's table differs from its results")
    args = parser.parse_args()
    available = results()
    problems, shown, differing = [], set(), []
    for path in markdown_files():
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            text = f.read()
        if "<!-- table: " not in text:
            continue
        rendered = render(path, available, problems, shown, differing)
        if rendered != text and not args.check:
            with open(os.path.join(ROOT, path), "w", encoding="utf-8") as f:
                f.write(rendered)
            print(f"render_tables: wrote {path}")
    problems += [f"bench/results/{name}.json: no doc shows its table "
                 f"(`<!-- table: {name} -->`)" for name in sorted(set(available) - shown)]
    if args.check:
        problems += [f"{path}:{line}: table {name} differs from bench/results/{name}.json, "
                     f"which renders this line as: {expected}"
                     for path, name, line, expected in differing]
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(f"render_tables: {len(shown)} tables match their results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
