"""bench/charts: the charts of the documentation's Benchmarks page, drawn from the JSON the
benches wrote in ``bench/results/`` (nothing is measured here).

    python bench/charts.py [--results DIR]

Writes, next to the JSON each one reads (needs matplotlib: ``pip install -e '.[bench]'``):

* ``consume.png``  -- consumer msg/s per ack mode and prefetch, 256 B and 64 KiB bodies, both
  clients in the same run (``consume.json``);
* ``consume_ratios.png`` -- amqstomp optimized acks over stomp.py, each comparison labelled with
  what it compares, one dot per run (``gate.json``, ``consume_cumulative.json``);
* ``produce.png``  -- producer msg/s and CPU per message per case (``produce.json``);
* ``codec.png``    -- frames/s of the parsers (``codec.json``);
* ``failover.png`` -- kill-to-first-message per master kill, broker takeover vs client
  reconnect (``failover.json``).

``bench/gate.py`` draws ``gate.png`` itself. A chart whose JSON is missing is skipped with a
line saying so; the documentation build then fails on the missing image (a broken link).
"""
import argparse
import json
import os
import statistics
import sys
from typing import Any, Callable, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_RESULTS = os.path.join(HERE, "results")

STOMPPY = "#888888"
AMQSTOMP = "#2a6ebb"
#: one colour per ack mode; stomp.py's bars are hatched
MODE_COLOURS = {"auto": "#f2c14e", "client-individual": "#9ecae1", "client": "#4292c6", "optimized": "#08306b"}


def _load(results: str, name: str) -> Optional[Dict[str, Any]]:
    path = os.path.join(results, name)
    if not os.path.exists(path):
        print("charts: %s missing, skipped" % path)
        return None
    with open(path, encoding="utf-8") as fh:
        data: Dict[str, Any] = json.load(fh)
    return data


def _save(fig: Any, results: str, name: str) -> None:
    path = os.path.join(results, name)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    print("charts: wrote %s" % path)


def consume(plt: Any, results: str) -> None:
    data = _load(results, "consume.json")
    if data is None:
        return
    modes = [("stomp.py", "auto"), ("stomp.py", "client-individual"), ("stomp.py", "client"),
             ("amqstomp", "auto"), ("amqstomp", "client-individual"), ("amqstomp", "client"),
             ("amqstomp", "optimized")]
    if data.get("summary"):  # bench/consume.py --runs: the median of each case's runs
        rate = {(e["client"], e["ack"], e["prefetch"], e["body_size"]): e["msg_per_s"]
                for e in data["summary"] if e.get("msg_per_s")}
    else:
        rate = {(c["client"], c["ack"], c["prefetch"], c["body_size"]): c["child"]["msg_per_s"]
                for c in data["cases"] if c.get("child", {}).get("msg_per_s")}
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8), sharey=False)
    for ax, body in zip(axes, (256, 65536)):
        prefetches = (1, 10, 1000)
        width = 0.8 / len(modes)
        for i, (client, ack) in enumerate(modes):
            values = [rate.get((client, ack, p, body), 0) for p in prefetches]
            label = "%s %s" % (client, "optimized acks" if ack == "optimized" else ack)
            if ack == "client":
                label += " (cumulative)"
            ax.bar([x + (i - len(modes) / 2 + 0.5) * width for x in range(len(prefetches))], values, width,
                   color=MODE_COLOURS[ack], hatch="//" if client == "stomp.py" else None, label=label,
                   edgecolor="black", linewidth=0.3)
        ax.set_xticks(range(len(prefetches)))
        ax.set_xticklabels(["prefetch %d" % p for p in prefetches])
        ax.set_yscale("log")
        ax.set_ylabel("messages/s (log scale)")
        ax.set_title("%s bodies" % ("256 B" if body == 256 else "64 KiB"))
        ax.grid(axis="y", alpha=0.3)
        ax.set_ylim(bottom=100)
    axes[0].legend(fontsize=8, loc="upper center", bbox_to_anchor=(1.1, -0.1), ncol=4)
    fig.suptitle("Consumer throughput on a local ActiveMQ 5.17, both clients in one run (%s, %s CPUs)"
                 % (data.get("started", "?")[:10], data.get("machine", {}).get("cpu_count", "?")))
    _save(fig, results, "consume.png")


def consume_ratios(plt: Any, results: str) -> None:
    gate = _load(results, "gate.json")
    like = _load(results, "consume_cumulative.json")
    rows: List[Any] = []  # (label, samples, source)
    if gate is not None:
        verdicts = {v["metric"]: v for v in gate["verdicts"]}
        for metric, label in (("consume_p1000_optimized_vs_stomppy_individual",
                               "vs stomp.py client-individual\n(an ACK per message)"),
                              ("consume_p1000_optimized_vs_stomppy_auto",
                               "vs stomp.py auto\n(acked by the broker: at-most-once)")):
            if metric in verdicts:
                rows.append((label, verdicts[metric]["samples"], "gate.json"))
    if like is not None:
        def ratio(run: Dict[str, Any], other: str) -> float:
            rates = {c["id"]: c["msg_per_s"] for c in run["cases"]}
            return float(rates["amqstomp:optimized:p1000:256B"] / rates[other])

        rows.append(("vs stomp.py client, a cumulative ACK\nevery 100 messages (like for like)",
                     [ratio(r, "stomp.py:client:p1000:256B") for r in like["runs"]], "consume_cumulative.json"))
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(10, 1.3 + 1.1 * len(rows)))
    for y, (label, samples, source) in enumerate(rows):
        median = statistics.median(samples)
        ax.barh(y, median, color=AMQSTOMP, alpha=0.8)
        ax.plot(samples, [y] * len(samples), "ko", markersize=4)
        ax.text(max(samples) * 1.03, y, "median %.1fx (runs %s; %s)"
                % (median, ", ".join("%.1f" % s for s in samples), source), va="center", fontsize=8)
    ax.axvline(1.0, color="black", linestyle="--", linewidth=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r[0] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(max(r[1]) for r in rows) * 1.9)
    ax.set_xlabel("amqstomp optimized acks msg/s / stomp.py msg/s, same run (prefetch 1000, 256 B)")
    ax.set_title("What the consume speed-up compares")
    _save(fig, results, "consume_ratios.png")


def produce(plt: Any, results: str) -> None:
    data = _load(results, "produce.json")
    if data is None:
        return
    cases = ["async", "sync", "tx100", "tx1000"]
    clients = ["stomp.py", "amqstomp-jms", "amqstomp"]
    summary = {(s["client"], s["case"]): s for s in data["summary"]}
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    width = 0.8 / len(clients)
    for ax, key, ylabel in ((axes[0], "msg_per_s", "messages/s (log scale)"),
                            (axes[1], "cpu_us_per_msg", "client CPU per message, µs (log scale)")):
        for i, client in enumerate(clients):
            values = [summary.get((client, c), {}).get(key, 0) for c in cases]
            colour = STOMPPY if client == "stomp.py" else AMQSTOMP
            ax.bar([x + (i - 1) * width for x in range(len(cases))], values, width, color=colour,
                   alpha=0.5 if client == "amqstomp" else 0.9, label=client if client != "amqstomp"
                   else "amqstomp Connection12.send", edgecolor="black", linewidth=0.3)
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels(["async\nnon-persistent", "sync persistent\n(receipt each)", "transactions\nof 100",
                            "transactions\nof 1,000"])
        ax.set_yscale("log")
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Producers, 256 B to a local ActiveMQ with KahaDB on disk, median of %s runs (%s)"
                 % (data.get("runs", "?"), data.get("date", "?")))
    _save(fig, results, "produce.png")


def codec(plt: Any, results: str) -> None:
    data = _load(results, "codec.json")
    if data is None:
        return
    names = list(data["cases"])
    values = [data["cases"][n]["frames_per_s"] for n in names]
    fig, ax = plt.subplots(figsize=(8, 3))
    ax.barh(range(len(names)), values, color=[STOMPPY if n == "stomp.py" else AMQSTOMP for n in names])
    for y, (n, v) in enumerate(zip(names, values)):
        ax.text(v * 1.05, y, "{:,.0f} frames/s ({:.1f}x)".format(v, data["cases"][n]["ratio"]), va="center",
                fontsize=8)
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(min(values) / 2, max(values) * 8)
    ax.set_xlabel("MESSAGE frames parsed per second (log scale)")
    ax.set_title("Parsing %s ActiveMQ-shaped MESSAGE frames (256 B bodies, 16 KiB chunks)"
                 % "{:,}".format(data.get("frames", 0)))
    _save(fig, results, "codec.png")


def failover(plt: Any, results: str) -> None:
    data = _load(results, "failover.json")
    if data is None:
        return
    kills = data["kills"]
    xs = [k["kill"] for k in kills]
    takeover = [k["takeover_s"] for k in kills]
    client = [k["client_reconnect_s"] for k in kills]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.bar(xs, takeover, color=STOMPPY, label="broker takeover (kill until the slave answers CONNECT)")
    ax.bar(xs, client, bottom=takeover, color=AMQSTOMP, label="client reconnect (back-off, CONNECT, re-SUBSCRIBE)")
    ax.set_xlabel("master kill (SIGKILL) number")
    ax.set_ylabel("seconds from kill to first message")
    ax.set_xticks(xs)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("Shared-store master/slave failover, %s (lost: %s)"
                 % (data.get("started", "?")[:10], data.get("messages", {}).get("lost", "?")))
    _save(fig, results, "failover.png")


CHARTS: Dict[str, Callable[[Any, str], None]] = {
    "consume": consume, "consume_ratios": consume_ratios, "produce": produce, "codec": codec, "failover": failover,
}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=DEFAULT_RESULTS, help="folder of the JSON files (default bench/results)")
    args = ap.parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("charts: matplotlib is not installed (pip install matplotlib)", file=sys.stderr)
        return 2
    for draw in CHARTS.values():
        draw(plt, args.results)
        plt.close("all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
