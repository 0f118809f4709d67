"""The rt lab's shared pieces: its messages and its error."""

import sys


def say(msg):
    print("rt-lab: " + msg, file=sys.stderr, flush=True)


class LabError(Exception):
    pass
