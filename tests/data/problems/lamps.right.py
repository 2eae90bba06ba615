import sys

n, m, *presses = map(int, sys.stdin.read().split())
on = set()
for lamp in presses:
    on ^= {lamp}
print(len(on))
