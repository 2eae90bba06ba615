import sys

n, *values = map(int, sys.stdin.read().split())
print(f"{sum(values[1::2]) / n:.10f}")
