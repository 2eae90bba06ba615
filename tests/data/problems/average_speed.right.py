import sys

n, *values = map(int, sys.stdin.read().split())
legs = list(zip(values[::2], values[1::2]))
print(sum(d for d, _ in legs) / sum(d / v for d, v in legs))
