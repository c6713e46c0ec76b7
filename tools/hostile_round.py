"""A hostile round (issue 41, must-show 3): commands a new user or an attacker would try, in the issue's classes,
aimed at places not fixed by hand. Prints each command, its exit code and the first stderr line, and counts the
breaks it can tell by itself: a traceback or internal error, exit 0 on bad input, a hidden temporary left, a run
past its bound. (A false message needs a reader: the table is for one.)

    python tools/hostile_round.py WORK_FOLDER --data-dir PREPARED_DATA [--only CLASS] [--bound 120]

WORK_FOLDER is made fresh (it must not exist); PREPARED_DATA is a prepared resnet50 data dir (hard-linked, not
changed)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

APP = [sys.executable, "-m", "harness.cli"]
RUN = "run --backend null -q --duration-ms 300"


Case = tuple[str, str, str, bool, dict[str, str]]


def _cases() -> list[Case]:
    """(class, case, shell command in the work folder, bad input?, files written there before it)."""
    c: list[Case] = []

    def add(cls: str, case: str, cmd: str, bad: bool = True, files: dict[str, str] | None = None) -> None:
        c.append((cls, case, cmd, bad, files or {}))

    # fields inside documents: card maps, tuned records, system overrides, fleet node maps, hwloc XML
    maps = {
        "no version": "cards: []\n",
        "cards a string": "version: 1\ncards: abc\n",
        "card cpus a mapping": "cards:\n- {index: 0, cpus: {a: 1}}\n",
        "card index -1": "cards:\n- {index: -1, cpus: '0'}\n",
        "card index 1e400": "cards:\n- {index: 1e400, cpus: '0'}\n",
        "card numa_node 'x'": "cards:\n- {index: 0, cpus: '0', numa_node: x}\n",
        "card cpus '1-0'": "cards:\n- {index: 0, cpus: '1-0'}\n",
        "card cpus ''": "cards:\n- {index: 0, cpus: ''}\n",
        "two cards same index": "cards:\n- {index: 0, cpus: '0'}\n- {index: 0, cpus: '1'}\n",
        "a list at the top": "- 1\n- 2\n",
        "YAML tag !!python/object": "cards: !!python/object:os.system ['true']\n",
        "10,000 cards": "cards:\n" + "".join(f"- {{index: {i}, cpus: '0'}}\n" for i in range(10000)),
    }
    for i, (case, text) in enumerate(maps.items()):
        text = text if case in ("no version", "cards a string", "a list at the top") else "version: 1\n" + text
        add("fields", f"card map: {case}", f"$APP topology show map{i}.yaml", files={f"map{i}.yaml": text})
        if i % 3 == 0:
            add("fields", f"run --cards map: {case}", f"$APP {RUN} --data-dir data --results r-map{i} "
                f"--cards map{i}.yaml", files={f"map{i}.yaml": text})
    tuned = {
        "chosen a list": {"chosen": [1]},
        "batch 'x'": {"chosen": {"Offline": {"batch_size": "x"}}},
        "format 99": {"format": 99},
        "a 1 MB string": {"benchmark": "x" * 1_100_000},
        "null": None,
    }
    for i, (case, doc) in enumerate(tuned.items()):
        add("fields", f"--tuned: {case}", f"$APP {RUN} --data-dir data --results r-t{i} --tuned tuned{i}.json",
            files={f"tuned{i}.json": json.dumps(doc)})
    overrides = {"a list": [1], "a number field": {"host_processor_core_count": "x" * 5000},
                 "nested": {"a": {"b": {"c": [1] * 100000}}}, "NaN": "NaN"}
    for i, (case, doc) in enumerate(overrides.items()):
        text = "NaN" if doc == "NaN" else json.dumps(doc)
        add("fields", f"--system-overrides: {case}", f"$APP submission build --submitter Org --system box "
            f"--system-overrides ov{i}.json runs -o sub-ov{i}", files={f"ov{i}.json": text})
    nodes = {"a list": "[1]", "a node of 5": '{"nodes": {"a": 5}}', "empty": "", "binary": "\\377\\376"}
    for i, (case, text) in enumerate(nodes.items()):
        add("fields", f"fleet --node-map: {case}", f"printf '{text}' > nodes{i}.json; "
            f"$APP fleet runs --node-map nodes{i}.json")
    xml = {"no PU": "<topology><object type='Machine'/></topology>",
           "PU os_index 'x'": "<topology><object type='Machine'><object type='PU' os_index='x'/></object></topology>",
           "entity bomb": "<!DOCTYPE t [<!ENTITY a 'aaaaaaaaaa'><!ENTITY b '&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;'>"
                          "<!ENTITY c '&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;'>]><topology>&c;</topology>",
           "external entity": "<!DOCTYPE t [<!ENTITY x SYSTEM 'file:///etc/passwd'>]><topology>&x;</topology>",
           "not XML": "hello"}
    for i, (case, text) in enumerate(xml.items()):
        add("fields", f"hwloc XML: {case}", f"$APP topology detect --hwloc-xml h{i}.xml", files={f"h{i}.xml": text})

    # check-then-open: FIFOs, devices and links where files are read, in other commands
    for what, make in (("a FIFO", "mkfifo {}"), ("/dev/zero", "ln -s /dev/zero {}"),
                       ("a dangling link", "ln -s nowhere {}"), ("a folder", "mkdir {}")):
        tag = what.replace(" ", "").replace("/", "")
        add("descriptors", f"topology show of {what}", f"{make.format('m-' + tag)}; $APP topology show m-{tag}")
        add("descriptors", f"--hwloc-xml {what}",
            f"{make.format('x-' + tag)}; $APP topology detect --hwloc-xml x-{tag}")
        add("descriptors", f"fleet --node-map {what}", f"{make.format('n-' + tag)}; $APP fleet runs --node-map n-{tag}")
        add("descriptors", f"--calibration-list {what}", f"{make.format('c-' + tag)}; $APP prepare --data-dir "
            f"data-c{tag} --precision int8 --calibration-list c-{tag} -q")
        add("descriptors", f"a run's manifest.json {what}", f"cp -a runs runs-{tag}; m=$(find runs-{tag} -path "
            f"'*run_1/manifest.json'); rm $m; {make.format('$m')}; $APP report runs-{tag} -o rep-{tag}.html")
        add("descriptors", f"fleet of a tree whose manifest is {what}", f"$APP fleet runs-{tag}")
        add("descriptors", f"reproduce: a detail log {what}", f"cp -a sub sub-{tag}; d=$(find sub-{tag} -path "
            f"'*performance/run_1/mlperf_log_detail.txt'); rm $d; {make.format('$d')}; $APP reproduce sub-{tag} "
            f"--data-dir data -o aud-{tag}")

    # environment values, on commands other than run
    env = {"APPLIANCE_INTRA_OP_THREADS=0": "topology detect", "APPLIANCE_INTRA_OP_THREADS=-1": "report runs -o e1.html",
           "APPLIANCE_INTRA_OP_THREADS=1e3": "submission check sub",
           "APPLIANCE_CUDNN_SEARCH=FAST": "topology detect", "APPLIANCE_IO_BINDING=yes": "fleet runs",
           "APPLIANCE_CUDA_GRAPH=2": "report runs -o e2.html", "APPLIANCE_OPENVINO_PROCESS=١": "topology detect",
           "APPLIANCE_RUN_REGISTRY=/dev/null": f"{RUN} --data-dir data --results r-e1",
           "APPLIANCE_RUN_REGISTRY=''": f"{RUN} --data-dir data --results r-e2",
           "APPLIANCE_POWERCAP_ROOT=/dev/zero": f"{RUN} --data-dir data --results r-e3",
           "APPLIANCE_POWERCAP_ROOT=nowhere": f"{RUN} --data-dir data --results r-e4",
           "APPLIANCE_DATA_DIR=/dev/null": "tune -o e-t.json -q",
           "APPLIANCE_BACKEND=bogus": "run -q --data-dir data --results r-e5",
           "APPLIANCE_IMAGE_VERSION=$(printf 'x\\nPASS')": f"{RUN} --data-dir data --results r-e6",
           "APPLIANCE_RESULTS_DIR=$(printf '\\377')": "run --backend null -q --data-dir data",
           "TMPDIR=/dev/null": "topology detect", "TMPDIR=nowhere": f"{RUN} --data-dir data --results r-e7",
           "HOME=/nonexistent": "report runs -o e3.html", "LANG=C LC_ALL=C": "topology detect --format table",
           "COLUMNS=-5": "--help"}
    for assignment, cmd in env.items():
        bad = not assignment.startswith(("HOME", "LANG", "COLUMNS", "TMPDIR=nowhere",
                                         "APPLIANCE_RUN_REGISTRY=''", "APPLIANCE_POWERCAP_ROOT=nowhere"))
        add("environment", assignment, f"env {assignment} $APP {cmd}", bad)

    # names, output, signals
    add("names", "topology -o a name with a newline", "$APP topology detect -o \"$(printf 'a\\nb.txt')\"", False)
    add("names", "report -o a name with 0xFF", "$APP report runs -o \"$(printf 'r\\377.html')\"")
    add("names", "fleet --json > /dev/full", "$APP fleet runs --json > /dev/full")
    add("names", "submission check --json > /dev/full", "$APP submission check sub --json > /dev/full")
    add("names", "topology detect --format json >&-", "$APP topology detect --format json >&-")
    add("names", "report -o /dev/stdout", "$APP report runs -o /dev/stdout")
    add("names", "submission build -o /dev/null",
        "$APP submission build --submitter Org --system box runs -o /dev/null")
    add("names", "submission build --submitter with a newline",
        "$APP submission build --submitter \"$(printf 'O\\nrg')\" --system box runs -o sub-n1")
    add("names", "submission build --submitter ..", "$APP submission build --submitter .. --system box runs -o sub-n2")
    add("names", "submission build --system-dir a/b", "$APP submission build --submitter Org --system box "
        "--system-dir a/b runs -o sub-n3")
    add("names", "--system with an escape sequence", f"$APP {RUN} --data-dir data --results r-n1 "
        "--system \"$(printf 'a\\033[2Jb')\"")
    add("names", "a 300-byte --system", f"$APP {RUN} --data-dir data --results r-n2 --system {'s' * 300}")
    add("names", "reproduce --json on a missing tree", "$APP reproduce nowhere --json")
    add("names", "submission check --json of a file", "echo x > afile; $APP submission check afile --json")
    add("names", "fleet --json of an empty folder", "mkdir -p empty; $APP fleet empty --json")
    add("names", "tune --json with a bad option", "$APP tune --data-dir data --batch-sizes 0 --json -o t0.json")
    add("names", "SIGTERM 2 s into report", "$APP report runs -o sig1.html & p=$!; sleep 2; kill -TERM $p; wait $p")
    add("names", "SIGINT 2 s into submission check", "$APP submission check sub & p=$!; sleep 2; kill -INT $p; wait $p")
    add("names", "SIGHUP 2 s into fleet", "$APP fleet runs & p=$!; sleep 2; kill -HUP $p; wait $p")
    add("names", "SIGTERM 3 s into reproduce", "$APP reproduce sub --data-dir data -o sig-aud & p=$!; sleep 3; "
        "kill -TERM $p; wait $p")

    # run-folder markers, in other commands
    add("markers", "fleet of a run folder itself", "$APP fleet $(dirname $(find runs -name manifest.json | head -1))",
        False)
    add("markers", "submission build -o inside a run folder", "$APP submission build --submitter Org --system box "
        "runs -o $(dirname $(find runs -path '*run_1/manifest.json'))/sub")
    add("markers", "reproduce -o inside the prepared data",
        "$APP reproduce sub --data-dir data -o data/preprocessed/aud")
    add("markers", "tune -o into the prepared data's shards folder", "$APP tune --data-dir data -o "
        "data/preprocessed/resnet50/t.json -q")
    add("markers", "topology detect -o onto a shard", "$APP topology detect -o data/preprocessed/resnet50/labels.npy")
    add("markers", "report -o onto the data's model record", "$APP report runs -o data/models/resnet50.json")
    add("markers", "prepare --data-dir inside a submission tree", "$APP prepare --data-dir sub/closed/Org/data -q")
    add("markers", "run --results inside a submission tree", f"$APP {RUN} --data-dir data --results sub/closed/r")
    add("markers", "submission build with the tree as input", "$APP submission build --submitter Org --system box "
        "sub -o sub-m1")
    add("markers", "fleet of a folder named run_1 of the user's", "mkdir -p run_1; $APP fleet run_1", False)

    # bounded work
    add("bounded", "fleet --threshold nan", "$APP fleet runs --threshold nan")
    add("bounded", "reproduce --duration-ms 10^12", "$APP reproduce sub --data-dir data --duration-ms "
        "1000000000000 -o aud-b1")
    add("bounded", "reproduce --tolerance 1e308%", "$APP reproduce sub --data-dir data --tolerance 1e308% -o aud-b2")
    add("bounded", "reproduce --tolerance -5%", "$APP reproduce sub --data-dir data --tolerance -5% -o aud-b3")
    add("bounded", "tune --requests 100000", "$APP tune --data-dir data --requests 100000 -o t-b1.json -q")
    add("bounded", "tune --batch-sizes of 10,000 entries", "$APP tune --data-dir data --batch-sizes "
        "$(seq -s, 1 10000) -o t-b2.json -q")
    add("bounded", "run --requests 10^9", f"$APP {RUN} --data-dir data --results r-b1 --requests 1000000000")
    add("bounded", "prepare --samples 10^12", "$APP prepare --data-dir data-b --samples 1000000000000 -q")
    add("bounded", "submission check of a 50-level deep tree", "mkdir -p deep/$(printf 'd/%.0s' $(seq 50)); "
        "$APP submission check deep")
    add("bounded", "submission check of 20,000 empty folders", "mkdir -p wide/closed/Org/results; "
        "(cd wide/closed/Org/results && seq 20000 | xargs mkdir); $APP submission check wide")
    add("bounded", "report of a run whose detail log is 60 MB of one line", "cp -a runs runs-b; d=$(find runs-b "
        "-path '*run_1/mlperf_log_detail.txt'); head -c 60000000 /dev/zero | tr '\\0' x > $d; "
        "$APP report runs-b -o b.html")
    return c


def _hidden(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob(".*tmp*")} | \
        {str(p.relative_to(folder)) for p in folder.rglob(".*.staging-*")}


def _fixtures(work: Path, data: Path) -> None:
    shutil.copytree(data, work / "data", copy_function=os.link, ignore=shutil.ignore_patterns("tuned"))
    for mode in ("performance", "accuracy"):
        subprocess.run([*APP, *RUN.split(), "--mode", mode, "--data-dir", "data", "--results", "runs",
                        "--system", "box"], cwd=work, check=True, capture_output=True)
    subprocess.run([*APP, "submission", "build", "--submitter", "Org", "--system", "box", "runs", "-o", "sub"],
                   cwd=work, check=True, capture_output=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("work", type=Path)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--only", default=None)
    ap.add_argument("--bound", type=float, default=120.0, help="seconds a command may take [120]")
    a = ap.parse_args()
    work = a.work.resolve()
    work.mkdir(parents=True)
    _fixtures(work, a.data_dir.resolve())
    prefix = f"APP={shlex.quote(shlex.join(APP))}; "  # a shell variable: the environment is left as it is
    breaks = 0
    cases = [x for x in _cases() if a.only in (None, x[0])]
    print("| # | class | case | command | exit | first stderr line | break |")
    print("|---|---|---|---|---|---|---|")
    for n, (cls, case, cmd, bad, files) in enumerate(cases, 1):
        for name, text in files.items():
            (work / name).write_text(text)
        before = _hidden(work)
        try:
            done = subprocess.run(["bash", "-c", prefix + cmd], cwd=work, capture_output=True, text=True,
                                  errors="replace", timeout=a.bound)
            code, err = done.returncode, done.stderr
        except subprocess.TimeoutExpired as exc:
            code, err = None, (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        why = []
        if code is None:
            why.append(f"hang past {a.bound:.0f} s")
        if "Traceback" in err or "internal error" in err:
            why.append("traceback / internal error")
        if bad and code == 0:
            why.append("exit 0 on bad input")
        if left := _hidden(work) - before:
            why.append(f"left {sorted(left)[0]}")
        breaks += bool(why)
        first = next((ln for ln in err.splitlines() if ln.strip()), "")[:220].replace("|", "\\|")
        shown = cmd.replace("$APP", "appliance").replace("|", "\\|")
        shown = shown if len(shown) < 160 else shown[:157] + "..."
        print(f"| {n} | {cls} | {case} | `{shown}` | {code} | {first} | {'; '.join(why)} |", flush=True)
    print(f"\n{len(cases)} commands, {breaks} break(s) found by the script")
    return 0


if __name__ == "__main__":
    sys.exit(main())
