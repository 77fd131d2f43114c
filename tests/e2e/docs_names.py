#!/usr/bin/env python3
"""Every `anneal` command, subcommand and option, and every trainer config key, that the docs name
exists in the binary (tests/e2e/docs_names_test.sh, e2e.docs_names).

What exists is asked of the binary itself, never of a second list: the commands from `anneal --help`,
each command's subcommands and options from `anneal CMD [SUB] --help` (CLI11's "Subcommands:" and
"Options:" sections), the config keys from `anneal train --list-keys` (train/config.cc's table, the
one the config parser reads; one key per line, its first word).

What the docs name:
  - commands: `anneal WORD` inside code (an inline `code span`, which may wrap across lines, or a
    fenced block, less its `#` comments); WORD must be a command; when that command has
    subcommands, the next word, if it is a lowercase word, must be one of them; every `--option`
    that follows, up to the end of that command (` -- `, `;`, `&&`, `||`, ` | `, a table's ` \| `
    between alternatives, `)`, another `anneal`), must be an option of the command (a trailing
    `*`, as in `--slurm-*`, means some option starts so);
  - config keys: `section.key` for the trainer's sections (model, data, optim, train, dist)
    anywhere in the text, a trailing `*` (`train.checkpoint_*`) meaning some key starts so; a file
    name (`model.safetensors`) is not a key.

usage: docs_names.py ANNEAL FILE...   (exit 1 naming each FILE:LINE and unknown name)
"""
import re
import subprocess
import sys

SEEN = {"commands": 0, "options": 0, "keys": 0}  # mentions checked, for the summary line
SECTIONS = ("model", "data", "optim", "train", "dist")
FILE_SUFFIXES = {"safetensors", "json", "jsonl", "yaml", "yml", "bin", "py", "sh", "txt", "md", "cc", "h",
                 "cu", "log", "csv", "tar", "gz", "html", "js", "css", "so", "pt", "pth", "npy", "units"}


def run_help(anneal, args):
    r = subprocess.run([anneal] + args + ["--help"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"docs_names: `anneal {' '.join(args + ['--help'])}` exited {r.returncode}: {r.stderr[:400]}")
    return r.stdout


def parse_help(text):
    """(subcommands, options) of one CLI11 help page."""
    subs, opts, section = [], set(), None
    for line in text.splitlines():
        if re.match(r"^\S.*:$", line):
            section = line[:-1].strip().lower()
            continue
        if not line.strip():
            continue
        name = re.match(r"^  (\S+)", line)  # a name two spaces in ("-h,--help", "train"); else a continuation
        if not name:
            continue
        if section == "subcommands":
            subs.append(name.group(1))
        elif section == "options":
            opts.update(o for o in name.group(1).split(",") if o.startswith("--"))
    return subs, opts


def known_names(anneal):
    top_subs, top_opts = parse_help(run_help(anneal, []))
    commands = {}  # "cmd" or "cmd sub" -> options
    subs_of = {}
    for c in top_subs:
        subs, opts = parse_help(run_help(anneal, [c]))
        commands[c] = opts | top_opts | {"--help"}
        subs_of[c] = subs
        for s in subs:
            _, sopts = parse_help(run_help(anneal, [c, s]))
            commands[c + " " + s] = sopts | {"--help"}
    r = subprocess.run([anneal, "train", "--list-keys"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"docs_names: `anneal train --list-keys` exited {r.returncode}: {r.stderr[:400]}")
    keys = {line.split()[0] for line in r.stdout.splitlines() if line.strip()}
    return commands, subs_of, keys


def code_pieces(text):
    """(offset, code) of every fenced block line (less `#` comments) and inline code span."""
    pieces, prose, fenced, offset = [], [], False, 0
    for line in text.splitlines(keepends=True):
        if re.match(r"^\s*(```|~~~)", line):
            fenced = not fenced
            prose.append(" " * len(line))  # keeps offsets; no span runs across a fence
        elif fenced:
            code = re.sub(r"(^|\s)#.*", "", line)
            pieces.append((offset, code))
            prose.append(" " * len(line))
        else:
            prose.append(line)
        offset += len(line)
    prose = "".join(prose)
    for m in re.finditer(r"(`+)(.+?)\1", prose, re.S):
        if "\n\n" not in m.group(2):
            pieces.append((m.start(2), m.group(2)))
    return pieces


CMD = re.compile(r"(?<![\w/.$-])anneal[ \t\n]+([a-z][a-z0-9-]*)")
END = re.compile(r"(?:\s--(?:\s|$)|;|&&|\|\||\s\\?\|\s|\)|(?<![\w/.$-])anneal\s)")


def check_commands(piece, base, commands, subs_of, report):
    for m in CMD.finditer(piece):
        word = m.group(1)
        SEEN["commands"] += 1
        if word not in subs_of:
            report(base + m.start(), f"unknown command 'anneal {word}'")
            continue
        name, start = word, m.end()  # start: where the command's arguments begin in piece
        if subs_of[word]:
            sub = re.compile(r"[ \t\n]+([a-z][a-z0-9-]*)").match(piece, start)
            if sub and sub.group(1) not in subs_of[word]:
                report(base + m.start(), f"unknown subcommand 'anneal {word} {sub.group(1)}' "
                                         f"(its subcommands: {', '.join(subs_of[word])})")
                continue
            if sub:
                name, start = word + " " + sub.group(1), sub.end()
        stop = END.search(piece, start)
        end = stop.start() if stop else len(piece)
        for o in re.compile(r"(?<![\w-])(--[A-Za-z0-9][A-Za-z0-9_-]*)(\*?)").finditer(piece, start, end):
            opt, star = o.group(1), o.group(2)
            SEEN["options"] += 1
            fits = any(k.startswith(opt) for k in commands[name]) if star else opt in commands[name]
            if not fits:
                report(base + o.start(), f"unknown option '{opt}{star}' of 'anneal {name}'")


KEY = re.compile(r"(?<![\w./$-])(" + "|".join(SECTIONS) + r")\.([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(\*?)")


def check_keys(text, keys, report):
    for m in KEY.finditer(text):
        key, star = m.group(1) + "." + m.group(2), m.group(3)
        if m.group(2).split(".")[0] in FILE_SUFFIXES or text[m.end():m.end() + 1] in "/(":
            continue  # a file name (model.safetensors), a path, a call
        if m.group(2).endswith((".weight", ".bias")) or text[m.end():m.end() + 2] == ".<":
            continue  # a tensor's name (model.norm.weight, model.layers.<l>....), never a config key
        SEEN["keys"] += 1
        fits = any(k.startswith(key) for k in keys) if star else key in keys
        if not fits:
            report(m.start(), f"unknown config key '{key}{star}' (anneal train --list-keys)")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    anneal, files = sys.argv[1], sys.argv[2:]
    commands, subs_of, keys = known_names(anneal)
    if not subs_of or not keys:
        sys.exit("docs_names: the binary listed no commands or no config keys")
    problems = 0
    for path in files:
        text = open(path, encoding="utf-8").read()

        def report(offset, what, path=path, text=text):
            nonlocal problems
            problems += 1
            print(f"{path}:{text.count(chr(10), 0, offset) + 1}: {what}")

        for base, piece in code_pieces(text):
            check_commands(piece, base, commands, subs_of, report)
        check_keys(text, keys, report)
    print(f"docs_names: {len(files)} file(s), {len(subs_of)} commands and {len(keys)} config keys known; "
          f"checked {SEEN['commands']} command, {SEEN['options']} option and {SEEN['keys']} config key mentions; "
          f"{problems} unknown name(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
