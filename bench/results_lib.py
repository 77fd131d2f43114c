"""bench/results_lib: reading the results files bench/run_all.sh writes (bench/results/NAME.md: a header
of command, commit, date, machine and exit status, then the benchmark's whole output with its
`RESULT [NAME] key=value ...` lines) and bench/targets.tsv, and judging each target: shared by
bench/check (the targets beside their figures, in a terminal) and bench/results_tables (the same
verdicts, and every RESULT line, as the markdown tables of bench/RESULTS.md).
"""
import glob
import os
import re
import subprocess
import sys

# The tool's name in its messages: bench/check or bench/results_tables.
PROG = "bench/" + os.path.basename(sys.argv[0] or "check")
HERE = os.path.dirname(os.path.abspath(__file__))
HEADER_RE = re.compile(r"- (command|commit|date|machine|exit status): (.*)")
RESULT_RE = re.compile(r"RESULT (.*)$")


def scan_results(path):
    """(header, [words of each RESULT line]) of one results file. The header is read from the lines
    before the first RESULT line."""
    header, lines = {}, []
    for line in open(path, encoding="utf-8", errors="replace"):
        m = HEADER_RE.match(line)
        if m and not lines:
            header[m.group(1)] = m.group(2).strip().strip("`")
        m = RESULT_RE.search(line.rstrip("\n"))
        if m:
            lines.append(m.group(1).split())
    return header, lines


def result_pairs(words):
    """The key=value dict of one RESULT line's words (what bench/check matches targets against): a
    leading word without "=" names the line and is left out; a stray word without "=" after it
    becomes the key "<word>" with an empty value (reported)."""
    pairs = dict(kv.split("=", 1) for kv in words if "=" in kv)
    pairs.update({f"<{w}>": "" for w in words[1:] if "=" not in w})
    return pairs


def result_line(words):
    """(name or "", [(key, value), ...] in the line's order) of one RESULT line's words."""
    name = words[0] if words and "=" not in words[0] else ""
    pairs = []
    for w in words[1 if name else 0:]:
        k, _, v = w.partition("=")
        pairs.append((k, v) if "=" in w else (f"<{w}>", ""))
    return name, pairs


def parse_results(path):
    header, lines = scan_results(path)
    return header, [result_pairs(words) for words in lines]


def load_results(directory):
    """{NAME: (header, [RESULT dicts])} of every DIRECTORY/NAME.md, by name."""
    return {os.path.basename(p)[:-3]: parse_results(p) for p in sorted(glob.glob(os.path.join(directory, "*.md")))}


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def selects(result, selector):
    if selector == "-":
        return True
    for cond in selector.split(","):
        m = re.match(r"([a-z0-9_]+)(>=|<=|=)(.*)", cond)
        if not m:
            raise SystemExit(f"{PROG}: bad selector {selector!r} in the targets file")
        key, op, want = m.groups()
        have = result.get(key)
        if have is None:
            return False
        if op == "=" and have != want:
            return False
        if op != "=":
            v = number(have)
            if v is None or (v < float(want) if op == ">=" else v > float(want)):
                return False
    return True


def selector_keys(selector):
    return [re.match(r"[a-z0-9_]+", cond).group(0) for cond in selector.split(",")]


def read_targets(path):
    rows = []
    for line in open(path, encoding="utf-8"):
        if line.startswith("#") or not line.strip():
            continue
        cols = line.rstrip("\n").split("\t")
        if len(cols) != 6 or cols[3] not in (">=", "<="):
            raise SystemExit(f"{PROG}: {path}: expected 6 tab-separated columns with >= or <=: {line!r}")
        rows.append(cols)
    return rows


def git(*args):
    try:
        r = subprocess.run(["git", *args], capture_output=True, text=True, cwd=HERE)
    except FileNotFoundError:  # no git installed
        return 127, ""
    return r.returncode, r.stdout.strip()


def provenance(header):
    """(problem or None, age text) for a results file's commit line."""
    commit = header.get("commit", "")
    if not commit:
        return "names no commit", "?"
    if "uncommitted" in commit:
        return f"made from a tree with uncommitted changes ({commit}): re-run at a commit", "dirty"
    if not re.fullmatch(r"[0-9a-f]{7,40}", commit):
        return f"names no commit of this repository ({commit})", "?"
    rc, shallow = git("rev-parse", "--is-shallow-repository")
    if rc != 0:
        return "cannot be checked: this copy of the sources is no git checkout (or git is missing)", "?"
    if shallow == "true":
        return "cannot be checked: this git checkout is shallow (git fetch --unshallow)", "?"
    rc, _ = git("rev-parse", "--verify", "--quiet", commit + "^{commit}")
    if rc != 0:
        return f"commit {commit} is not in this repository: re-run the benchmark (bench/run_all.sh) at a commit that is", "?"
    rc, _ = git("merge-base", "--is-ancestor", commit, "HEAD")
    if rc != 0:
        return f"commit {commit} is not an ancestor of HEAD", "?"
    _, n = git("rev-list", "--count", commit + "..HEAD")
    return None, f"{n} commits old"


def verdict(v, op, target, spread):
    clears = v >= target if op == ">=" else v <= target
    if spread is None:
        return "met (1 run)" if clears else "not met"
    margin = v - target if op == ">=" else target - v
    if margin > spread:
        return "met"
    return "within spread" if margin > -spread else "not met"


def file_problems(files):
    """What --require-all fails on in the files themselves: a benchmark that did not exit 0, no RESULT
    line, a RESULT key with no value."""
    problems = []
    for name, (header, lines) in files.items():
        if header.get("exit status") != "0":
            problems.append(f"{name}: exit status {header.get('exit status', 'missing')}")
        if not lines:
            problems.append(f"{name}: no RESULT line")
        for r in lines:
            empty = [k.strip("<>") + (" (a word without =)" if k.startswith("<") else "") for k, v in r.items() if v == ""]
            if empty:
                problems.append(f"{name}: RESULT with no value for {', '.join(empty)}")
    return problems


def judge(files, targets):
    """Each target beside each figure it selects, in the targets file's order (a generator): dicts with
    bench, selector, key, op, target, what, header (the results file's), and either hit None (no
    RESULT line has the figure) or hit (the RESULT dict), where (the key and its selector's values),
    value (as printed), spread (as printed, or None), shown (value ±spread) and said (the verdict:
    met, met (1 run), within spread, not met, unreadable)."""
    for bench, selector, key, op, target, what in targets:
        header, lines = files.get(bench, ({}, []))
        base = dict(bench=bench, selector=selector, key=key, op=op, target=target, what=what, header=header)
        hits = [r for r in lines if key in r and selects(r, selector)]
        if not hits:
            yield dict(base, hit=None, where=key, value="-", spread=None, shown="-", said="no result")
            continue
        for r in hits:
            v = number(r[key])
            where = key if selector == "-" else key + " [" + " ".join(f"{k}={r[k]}" for k in selector_keys(selector)) + "]"
            spread = number(r.get(key + "_spread"))
            said = "unreadable" if v is None else verdict(v, op, float(target), spread)
            shown = r[key] + ("" if spread is None else f" ±{r[key + '_spread']}")
            yield dict(base, hit=r, where=where, value=r[key], spread=None if spread is None else r[key + "_spread"],
                       shown=shown, said=said)
