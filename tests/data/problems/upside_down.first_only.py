h, w = map(int, input().split())
for _ in range(h):
    print(input())
