#!/usr/bin/env python3
"""Open a reproduction report in a real headless browser (Debian's ``chromium``): render it at a
narrow width (500 CSS px, headless chromium's narrowest window) to a screenshot, and check from
the rendered page that its tables and figures are there (figures decoded, not broken) and that
it does not scroll sideways.

    python scripts/check_report_html.py results/report/report.html --screenshot shot.png

Exit 0 when the page has at least --min-tables tables and --min-figures decoded images and is
no wider than --width; 1 otherwise; 2 when no chromium is installed (``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Runs in the page after load: the counts the check needs, written into the DOM dump.
PROBE = """
<script>
window.addEventListener('load', () => {
  const imgs = [...document.images];
  const decoded = imgs.filter(i => i.complete && i.naturalWidth > 0).length;
  const p = document.createElement('pre'); p.id = 'atnbench-probe';
  p.textContent = `tables=${document.querySelectorAll('table').length} images=${imgs.length} decoded=${decoded} width=${document.documentElement.scrollWidth}`;
  document.body.appendChild(p);
});
</script>
"""


def chromium() -> str | None:
    return next((path for name in ("chromium", "chromium-browser", "google-chrome") if (path := shutil.which(name))), None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--screenshot", type=Path, default=Path("report-phone.png"))
    parser.add_argument("--width", type=int, default=500,
                        help="viewport width in CSS pixels (500: the narrowest window headless chromium opens; "
                             "a narrower one is rendered at 500, so the check could not fail)")
    parser.add_argument("--min-tables", type=int, default=1)
    parser.add_argument("--min-figures", type=int, default=1)
    args = parser.parse_args()
    browser = chromium()
    if browser is None:
        print("error: no chromium found; install it with `apt-get install chromium`", file=sys.stderr)
        return 2
    if not args.report.is_file():
        print(f"error: no report at {args.report}", file=sys.stderr)
        return 2
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--allow-file-access-from-files"]
    with tempfile.TemporaryDirectory() as tmp:
        probed = Path(tmp) / "probed.html"
        probed.write_text(args.report.read_text().replace("</body>", PROBE + "</body>"))
        dom = subprocess.run([browser, *flags, f"--window-size={args.width},3000", "--virtual-time-budget=5000",
                              "--dump-dom", probed.as_uri()],
                             capture_output=True, text=True, timeout=120).stdout
        subprocess.run([browser, *flags, f"--window-size={args.width},3000", f"--screenshot={args.screenshot.absolute()}",
                        args.report.absolute().as_uri()], capture_output=True, timeout=120)
    match = re.search(r"tables=(\d+) images=(\d+) decoded=(\d+) width=(\d+)", dom)
    if match is None:
        print("error: the page did not render (no probe result in the DOM)", file=sys.stderr)
        return 1
    tables, images, decoded, width = map(int, match.groups())
    print(f"{args.report}: {tables} tables, {decoded} of {images} figures decoded, page width {width}px "
          f"at a {args.width}px viewport; screenshot {args.screenshot}")
    ok = tables >= args.min_tables and decoded >= args.min_figures and decoded == images and width <= args.width
    if width > args.width:
        print(f"error: the page is {width}px wide at a {args.width}px viewport (it scrolls sideways)", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
