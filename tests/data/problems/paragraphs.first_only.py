import sys

lines = sys.stdin.read().strip("\n").split("\n")
print(sum(not line.strip() for line in lines) + 1)
