import sys

n, m, *presses = map(int, sys.stdin.read().split())
print(len(set(presses)))
