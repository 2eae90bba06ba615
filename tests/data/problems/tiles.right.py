h, w, length = map(int, input().split())
print(h * -(-w // length))
