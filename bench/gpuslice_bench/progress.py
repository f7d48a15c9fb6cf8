"""The live progress line on stderr: scenario, run, mode and seconds left.

On a terminal the line is redrawn in place twice a second; into a file or a pipe (CI logs) each
run gets one line instead, so that logs stay readable.
"""
import sys
import threading
import time


class Progress:
    def __init__(self, stream=sys.stderr, quiet=False):
        self.stream = stream
        self.tty = stream.isatty()
        self.quiet = quiet
        self._text = None
        self._deadline = 0.0
        self._lock = threading.Lock()
        self._width = 0
        self._thread = None
        self._stop = threading.Event()

    def phase(self, text, seconds):
        """A new phase that should take about `seconds`; shown at once."""
        with self._lock:
            changed = text != self._text
            self._text, self._deadline = text, time.monotonic() + seconds
        if self.quiet:
            return
        if self.tty:
            if self._thread is None:
                self._thread = threading.Thread(target=self._redraw_loop, name="progress", daemon=True)
                self._thread.start()
            self._redraw()
        elif changed:
            print(f"gpuslice-bench: {text} ({seconds:.0f} s)", file=self.stream, flush=True)

    def note(self, text):
        """A line of its own (a skipped mode, a warning), without losing the progress line."""
        self.clear()
        print(f"gpuslice-bench: {text}", file=self.stream, flush=True)

    def _redraw(self):
        with self._lock:
            if self._text is None:
                return
            left = max(0, self._deadline - time.monotonic())
            line = f"gpuslice-bench: {self._text} · {left:3.0f} s left"
            pad = max(0, self._width - len(line))
            self._width = len(line)
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()

    def _redraw_loop(self):
        while not self._stop.wait(0.5):
            self._redraw()

    def clear(self):
        if self.tty and not self.quiet and self._width:
            with self._lock:
                self.stream.write("\r" + " " * self._width + "\r")
                self.stream.flush()
                self._width = 0

    def done(self):
        self._stop.set()
        if self._thread:
            self._thread.join()
        self._text = None
        self.clear()
