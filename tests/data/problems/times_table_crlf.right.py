n, k = map(int, input().split())
for i in range(1, k + 1):
    print(f"{n} x {i} = {n * i}")
