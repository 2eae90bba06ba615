import sys

lines = sys.stdin.read().split("\n")
starts = [
    i for i, line in enumerate(lines) if line.strip() and (i == 0 or not lines[i - 1].strip())
]
print(len(starts))
