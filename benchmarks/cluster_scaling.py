"""Scaling out: one partitioned topic on a 1-broker and on a 2-broker cluster, same run.

    python benchmarks/cluster_scaling.py [--rounds 3] [--duration-s 20] [--warmup-s 5]
                                         [--partitions 4] [--workloads W1,W2]
                                         [--client quasar|official] [--json FILE]

It starts its own ZooKeeper, then for each round and workload a fresh 1-broker and a
fresh 2-broker cluster (``quasar broker`` members, default settings: fsync before
every receipt), in alternating order from round to round so that drifting load on the
machine falls on both alike. Each cluster gets a namespace with one bundle per
partition and a topic whose partitions hash into different bundles; the partitions'
owners are assigned one after another through one broker's lookup, which spreads them
over the members, and are printed. ``quasar perf pubsub`` (a producer process and a
consumer process) drives the topic:

* ``W1``: no batching, unbounded rate, 1,000 messages in flight over all partitions;
* ``W2``: client batching (``quasar perf``'s defaults: 1 ms, 128 KiB, 1,000 messages).

Messages are 1 KiB. Each broker's CPU (utime + stime from ``/proc``, its threads and
any children) is sampled throughout and read over exactly the producer's measured
window (its wall-clock bounds are in the perf summary). Per configuration it reports
published and consumed msg/s, the brokers' combined CPU per published message, each
broker's share of it, publish latency p50/p99, the cores the clients and the whole
machine used, and the 2-broker / 1-broker ratios of the medians over the rounds.

Brokers and load generators share the machine's cores: the load average at start and
end, the number of client processes and the cores they used are printed and written
to the JSON, since on a small machine they, not the brokers, may bound a figure.
Numbers are for comparison on one machine; nothing here asserts speed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from quasar.client.admin import AdminClient, call_admin  # noqa: E402
from quasar.resources.bundles import BundlesData, bundle_of  # noqa: E402
from quasar.testing.cluster import ClusterProcess  # noqa: E402
from quasar.testing.zookeeper import ZooKeeperProcess  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
NAMESPACE = "public/scaling"
SAMPLE_INTERVAL_S = 0.05
MAX_BUNDLES = 128  # loadBalancerNamespaceMaximumBundles' default
NAMES_PER_BUNDLE_COUNT = 300
# The pubsub parent only waits; its producer and consumer processes do the work.
CLIENT_PROCESSES = "3 (pubsub parent, mostly idle; producer; consumer)"

WORKLOADS: dict[str, tuple[str, list[str]]] = {
    "W1": (
        "unbatched, unbounded rate, 1,000 in flight",
        ["--no-batching", "-o", "1000", "--max-outstanding-across-partitions", "1000"],
    ),
    "W2": ("client batching (1 ms, 128 KiB, 1,000 msgs), unbounded rate", ["--batching"]),
}
CLIENTS = {"quasar": "quasar", "official": "pulsar"}


# --- CPU accounting ---------------------------------------------------------------------


def _stat_cpu_s(pid: int) -> float:
    """utime + stime + cutime + cstime of one process (all its threads), seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # After the command name the fields start at 3 (state): utime is field 14.
    return sum(int(v) for v in fields[11:15]) / CLK_TCK


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            tasks = list(Path(f"/proc/{current}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process and its live descendants (and its reaped children)."""
    return _stat_cpu_s(pid) + sum(_stat_cpu_s(c) for c in _descendants(pid))


def machine_busy_s() -> float:
    """CPU seconds all cores spent not idle since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / CLK_TCK


def loadavg() -> list[float]:
    return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]


class CpuSampler(threading.Thread):
    """Samples (wall time, CPU of each pid, machine busy) until stopped, so that CPU
    can be read over any interval inside the run (linear between samples)."""

    def __init__(self, pids: list[int]) -> None:
        super().__init__(name="cpu-sampler", daemon=True)
        self.pids = pids
        self.samples: list[tuple[float, list[float], float]] = []
        self._stopping = threading.Event()

    def sample(self) -> None:
        cpus = [tree_cpu_s(pid) for pid in self.pids]
        self.samples.append((time.time(), cpus, machine_busy_s()))

    def run(self) -> None:
        self.sample()
        while not self._stopping.wait(SAMPLE_INTERVAL_S):
            self.sample()

    def stop(self) -> None:
        self._stopping.set()
        self.join()
        self.sample()

    def _at(self, t: float) -> tuple[list[float], float]:
        samples = self.samples
        if t <= samples[0][0]:
            return samples[0][1], samples[0][2]
        for (t0, c0, m0), (t1, c1, m1) in zip(samples, samples[1:], strict=False):
            if t0 <= t <= t1:
                f = (t - t0) / (t1 - t0) if t1 > t0 else 0.0
                cpus = [a + (b - a) * f for a, b in zip(c0, c1, strict=True)]
                return cpus, m0 + (m1 - m0) * f
        return samples[-1][1], samples[-1][2]

    def between(self, start: float, end: float) -> tuple[list[float], float]:
        """CPU seconds of each pid, and of the machine, from ``start`` to ``end``."""
        c0, m0 = self._at(start)
        c1, m1 = self._at(end)
        return [b - a for a, b in zip(c0, c1, strict=True)], m1 - m0


# --- one measurement --------------------------------------------------------------------


@dataclass
class Measurement:
    workload: str
    brokers: int
    round: int
    topic: str = ""
    owners: dict[str, int] = field(default_factory=dict)  # partition -> broker index
    published_msg_s: float = 0.0
    consumed_msg_s: float = 0.0
    window_s: float = 0.0
    window_messages: int = 0
    broker_cpu_s: list[float] = field(default_factory=list)
    broker_us_per_msg: float = 0.0
    broker_cores: float = 0.0
    broker_share: list[float] = field(default_factory=list)
    publish_p50_ms: float = 0.0
    publish_p99_ms: float = 0.0
    client_cores: float = 0.0
    machine_cores: float = 0.0
    # The machine's busy CPU less the brokers' and the clients': other processes.
    other_cores: float = 0.0
    error: str | None = None


def spread_topic(partitions: int) -> tuple[str, int]:
    """A topic name and a number of even bundles such that each partition falls into
    a bundle of its own, so the load manager places the partitions one by one.

    Bundles are found by the CRC-32 of the name, and the names of one topic's
    partitions differ only in their last characters, so for some counts no name
    gives every partition its own bundle; more bundles are tried until one does.
    """
    tag = uuid.uuid4().hex[:8]
    for num_bundles in range(partitions, MAX_BUNDLES + 1):
        bundles = BundlesData.even(num_bundles)
        for k in range(NAMES_PER_BUNDLE_COUNT):
            name = f"scaling-{tag}-{k}"
            found = {
                bundle_of(bundles, f"persistent://{NAMESPACE}/{name}-partition-{i}")
                for i in range(partitions)
            }
            if len(found) == partitions:
                return name, num_bundles
    raise RuntimeError(f"no topic name spreads {partitions} partitions over bundles")


def prepare_topic(cluster: ClusterProcess, partitions: int) -> tuple[str, dict[str, int]]:
    """Create the namespace and topic; assign and return each partition's owner."""
    topic, num_bundles = spread_topic(partitions)
    full = f"persistent://{NAMESPACE}/{topic}"
    brokers = {b.url: i for i, b in enumerate(cluster.brokers)}

    async def setup(admin: AdminClient) -> dict[str, int]:
        await admin.request(
            "PUT", admin.namespace_path(NAMESPACE), {"bundles": {"numBundles": num_bundles}}
        )
        await admin.create_partitioned_topic(full, partitions)
        owners: dict[str, int] = {}
        for i in range(partitions):
            answer = await admin.get_json(f"/lookup/v2/topic/persistent/{NAMESPACE}/"
                                          f"{topic}-partition-{i}")
            owners[str(i)] = brokers[answer["brokerUrl"]]
        return owners

    return topic, call_admin(cluster.brokers[0].admin_url, setup)


def run_pubsub(
    cluster: ClusterProcess, m: Measurement, args: argparse.Namespace, workdir: Path
) -> None:
    client = CLIENTS[args.client]
    out = workdir / f"{m.workload}-{m.brokers}-{m.round}.json"
    log = workdir / f"{m.workload}-{m.brokers}-{m.round}.log"
    consumer = ["--batch-receive", "1000"] if m.workload == "W2" and client == "pulsar" else []
    cmd = [
        sys.executable, "-m", "quasar.cli.main", "perf", "pubsub",
        "-u", cluster.service_url, "--admin-url", cluster.brokers[0].admin_url,
        "--client", client, "-s", "1024",
        "-t", str(args.warmup_s + args.duration_s), "--warmup", str(args.warmup_s),
        "-i", "5", "-ss", f"scaling-{uuid.uuid4().hex[:8]}", "--json", str(out),
        *WORKLOADS[m.workload][1], *consumer, f"persistent://{NAMESPACE}/{m.topic}",
    ]
    sampler = CpuSampler([b.proc.pid for b in cluster.brokers if b.proc is not None])
    sampler.start()
    try:
        with open(log, "wb") as f:
            done = subprocess.run(
                cmd, stdout=f, stderr=subprocess.STDOUT, timeout=args.duration_s + 180,
                env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
            )
    finally:
        sampler.stop()
    if not out.exists():
        m.error = f"quasar perf exited {done.returncode}; see {log}"
        return
    data = json.loads(out.read_text())
    produce, consume = data.get("produce", {}), data.get("consume", {})
    for role, part in (("produce", produce), ("consume", consume)):
        if "error" in part:
            m.error = f"{role}: {part['error']}; see {log}"
            return
    window = produce["window"]
    if window["ended_in_warmup"] or "start_unix_s" not in window:
        m.error = f"the producer's run ended in its warm-up; see {log}"
        return
    cpus, machine = sampler.between(window["start_unix_s"], window["end_unix_s"])
    m.window_s = window["seconds"]
    m.window_messages = window["messages"]
    m.published_msg_s = produce["throughput"]["msg_s"]
    m.consumed_msg_s = consume["throughput"]["msg_s"]
    m.broker_cpu_s = [round(c, 3) for c in cpus]
    total = sum(cpus)
    if m.window_messages:
        m.broker_us_per_msg = round(total * 1e6 / m.window_messages, 2)
    if m.window_s > 0:
        m.broker_cores = round(total / m.window_s, 3)
        m.machine_cores = round(machine / m.window_s, 3)
    m.broker_share = [round(c / total, 3) if total else 0.0 for c in cpus]
    m.publish_p50_ms = produce["latency_ms"]["p50"]
    m.publish_p99_ms = produce["latency_ms"]["p99"]
    m.client_cores = round(produce["cpu"]["cores"] + consume["cpu"]["cores"], 3)
    m.other_cores = round(max(0.0, m.machine_cores - m.broker_cores - m.client_cores), 3)


def measure(
    zookeeper: ZooKeeperProcess, m: Measurement, args: argparse.Namespace, workdir: Path
) -> Measurement:
    work = workdir / f"{m.workload}-{m.brokers}-{m.round}"
    work.mkdir(parents=True)
    cluster = ClusterProcess(
        work, zookeeper, brokers=m.brokers, cluster_name=f"scaling-{m.brokers}",
        session_timeout_ms=30_000,
    )
    cluster.start()
    try:
        m.topic, m.owners = prepare_topic(cluster, args.partitions)
        run_pubsub(cluster, m, args, workdir)
    except Exception as exc:  # one failed measurement is reported, not fatal
        m.error = f"{type(exc).__name__}: {exc}"
    finally:
        cluster.stop()
    return m


# --- report -----------------------------------------------------------------------------

FIGURES = [
    "published_msg_s", "consumed_msg_s", "broker_us_per_msg", "broker_cores",
    "publish_p50_ms", "publish_p99_ms", "client_cores", "machine_cores", "other_cores",
]


def medians(runs: list[Measurement]) -> dict[str, Any]:
    ok = [r for r in runs if r.error is None]
    if not ok:
        return {"rounds": 0}
    out: dict[str, Any] = {"rounds": len(ok)}
    for name in FIGURES:
        out[name] = round(statistics.median(getattr(r, name) for r in ok), 3)
    shares = [r.broker_share for r in ok]
    out["broker_share"] = [round(statistics.median(s), 3) for s in zip(*shares, strict=True)]
    return out


def ratios(one: dict[str, Any], two: dict[str, Any]) -> dict[str, float | None]:
    return {
        name: round(two[name] / one[name], 3) if one.get(name) and name in two else None
        for name in ("published_msg_s", "consumed_msg_s", "broker_us_per_msg",
                     "publish_p50_ms", "publish_p99_ms")
    }


def table(summary: dict[str, Any]) -> str:
    header = (f"{'workload':8} {'brokers':>7} {'pub msg/s':>10} {'con msg/s':>10} "
              f"{'brk us/msg':>10} {'brk cores':>9} {'share':>11} {'p50 ms':>8} "
              f"{'p99 ms':>8} {'cli cores':>9} {'all cores':>9} {'other':>6}")
    rows = [header, "-" * len(header)]
    for workload, per in summary.items():
        for key in ("1", "2"):
            fig = per[key]
            if not fig.get("rounds"):
                rows.append(f"{workload:8} {key:>7}  (every round failed)")
                continue
            share = "/".join(f"{s * 100:.0f}" for s in fig["broker_share"]) + " %"
            rows.append(
                f"{workload:8} {key:>7} {fig['published_msg_s']:>10,.0f} "
                f"{fig['consumed_msg_s']:>10,.0f} {fig['broker_us_per_msg']:>10.1f} "
                f"{fig['broker_cores']:>9.2f} {share:>11} {fig['publish_p50_ms']:>8.1f} "
                f"{fig['publish_p99_ms']:>8.1f} {fig['client_cores']:>9.2f} "
                f"{fig['machine_cores']:>9.2f} {fig['other_cores']:>6.2f}"
            )
        r = per["ratio_2_to_1"]

        def x(name: str, r: dict[str, float | None] = r) -> str:
            value = r.get(name)
            return "-" if value is None else f"{value:.2f}x"

        rows.append(
            f"{workload:8} {'2/1':>7} {x('published_msg_s'):>10} {x('consumed_msg_s'):>10} "
            f"{x('broker_us_per_msg'):>10} {'':>9} {'':>11} {x('publish_p50_ms'):>8} "
            f"{x('publish_p99_ms'):>8}"
        )
    return "\n".join(rows)


def machine_info() -> dict[str, Any]:
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
        check=False,
    ).stdout.strip()
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit,
    }


# --- main -------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="One partitioned topic on 1 and on 2 brokers, measured in the same run."
    )
    p.add_argument("--rounds", type=int, default=3,
                   help="measurements of each configuration; the median is reported "
                   "(1 and 2 brokers alternate in order; default 3)")
    p.add_argument("--duration-s", type=float, default=20.0,
                   help="measured seconds per run, after the warm-up (default 20)")
    p.add_argument("--warmup-s", type=float, default=5.0,
                   help="seconds at the start of each run left out (default 5)")
    p.add_argument("--partitions", type=int, default=4,
                   help="partitions of the topic (default 4)")
    p.add_argument("--workloads", default="W1,W2",
                   help="comma-separated: W1 (unbatched, 1,000 in flight), W2 "
                   "(client batching); default W1,W2")
    p.add_argument("--client", choices=sorted(CLIENTS), default="quasar",
                   help="load generator driver: quasar's client or the official "
                   "pulsar-client (default quasar)")
    p.add_argument("--json", dest="json_path", metavar="FILE",
                   help="write every measurement and the medians as JSON")
    p.add_argument("--keep-dir", metavar="DIR",
                   help="keep data, broker logs and perf output here (default: a "
                   "temporary directory, removed at the end)")
    args = p.parse_args(argv)
    args.workload_names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in args.workload_names if w not in WORKLOADS]
    if unknown or not args.workload_names:
        p.error(f"unknown workloads {unknown}; choose from {', '.join(WORKLOADS)}")
    if args.rounds < 1 or args.partitions < 2 or args.duration_s <= 0 or args.warmup_s < 0:
        p.error("--rounds >= 1, --partitions >= 2, --duration-s > 0, --warmup-s >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(args.keep_dir or tempfile.mkdtemp(prefix="quasar-scaling-"))
    workdir.mkdir(parents=True, exist_ok=True)
    load_start = loadavg()
    print(f"machine: {os.cpu_count()} cores, load average at start "
          f"{' '.join(f'{v:.2f}' for v in load_start)}")
    print(f"client processes per run: {CLIENT_PROCESSES}; client {args.client}; "
          f"{args.partitions} partitions; 1 KiB messages; fsync on")
    print("brokers and clients share these cores: each broker process uses at most one "
          "core (one event loop), and the clients compete with them")
    runs: list[Measurement] = []
    zookeeper = ZooKeeperProcess(workdir / "zookeeper").start()
    try:
        for rnd in range(args.rounds):
            order = (1, 2) if rnd % 2 == 0 else (2, 1)
            for workload in args.workload_names:
                for brokers in order:
                    m = measure(zookeeper, Measurement(workload, brokers, rnd), args, workdir)
                    runs.append(m)
                    owners = " ".join(f"p{p}->b{b}" for p, b in m.owners.items())
                    if m.error:
                        print(f"round {rnd + 1} {workload} {brokers} broker(s): "
                              f"FAILED {m.error}", flush=True)
                        continue
                    print(f"round {rnd + 1} {workload} {brokers} broker(s): "
                          f"{m.published_msg_s:,.0f} msg/s published, "
                          f"{m.consumed_msg_s:,.0f} consumed, "
                          f"{m.broker_us_per_msg:.1f} us broker CPU/msg, "
                          f"shares {m.broker_share}; owners {owners}", flush=True)
    finally:
        zookeeper.stop()
    load_end = loadavg()
    summary: dict[str, Any] = {}
    for workload in args.workload_names:
        per = {
            str(n): medians([r for r in runs if r.workload == workload and r.brokers == n])
            for n in (1, 2)
        }
        per["ratio_2_to_1"] = ratios(per["1"], per["2"]) if per["1"].get("rounds") and \
            per["2"].get("rounds") else {}
        summary[workload] = per
    print()
    print(f"medians of {args.rounds} round(s), {args.duration_s:g} s each after "
          f"{args.warmup_s:g} s warm-up; brk us/msg = CPU of all brokers per published "
          "message; share = each broker's part of it")
    print(table(summary))
    print(f"load average at start {' '.join(f'{v:.2f}' for v in load_start)}, at end "
          f"{' '.join(f'{v:.2f}' for v in load_end)} ({os.cpu_count()} cores); "
          "'all cores' is the whole machine's busy CPU during the window, 'other' the "
          "part of it neither the brokers nor the clients used")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps({
            "machine": machine_info(),
            "loadavg_start": load_start,
            "loadavg_end": load_end,
            "client_processes": CLIENT_PROCESSES,
            "settings": {
                "rounds": args.rounds, "duration_s": args.duration_s,
                "warmup_s": args.warmup_s, "partitions": args.partitions,
                "workloads": {w: WORKLOADS[w][0] for w in args.workload_names},
                "client": args.client, "message_bytes": 1024, "fsync": True,
            },
            "medians": summary,
            "measurements": [asdict(r) for r in runs],
        }, indent=2) + "\n")
    failed = any(r.error for r in runs)
    if failed:
        print(f"some runs failed: their logs are in {workdir}")
    elif not args.keep_dir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
