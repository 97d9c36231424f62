#!/usr/bin/env python3
"""Plots soak.csv (second, rss_kb, ok, p99_ms) as an SVG: the server's
resident memory and the per-second p99 latency over time, one above the
other. Standard library only."""
import csv
import sys


def panel(rows, key, scale, label, top, height, width, colour):
    xs = [int(r["second"]) for r in rows]
    ys = [float(r[key]) * scale for r in rows]
    xmax = max(xs) or 1
    ymax = max(ys) * 1.1 or 1
    points = " ".join(
        "%.1f,%.1f" % (60 + (width - 80) * x / xmax, top + height - height * y / ymax)
        for x, y in zip(xs, ys))
    out = ['<text x="60" y="%d" font-size="13">%s (max %.1f)</text>' % (top - 6, label, max(ys))]
    out.append('<line x1="60" y1="%d" x2="%d" y2="%d" stroke="#888"/>' %
               (top + height, width - 20, top + height))
    out.append('<line x1="60" y1="%d" x2="60" y2="%d" stroke="#888"/>' % (top, top + height))
    for frac in (0, 0.5, 1):
        y = top + height - height * frac
        out.append('<text x="55" y="%.0f" font-size="11" text-anchor="end">%.0f</text>' %
                   (y + 4, ymax * frac))
    out.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>' %
               (colour, points))
    out.append('<text x="%d" y="%d" font-size="11" text-anchor="end">%d s</text>' %
               (width - 20, top + height + 14, xmax))
    return out


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    width, height = 720, 150
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
             'font-family="sans-serif">' % (width, 2 * height + 90)]
    parts += panel(rows, "rss_kb", 1 / 1024, "server RSS, MiB", 25, height, width, "#1f77b4")
    parts += panel(rows, "p99_ms", 1, "p99 latency per second, ms", height + 70, height, width,
                   "#d62728")
    parts.append("</svg>")
    open(sys.argv[2], "w").write("\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
