input()
print(sum(1 if int(age) < 12 else 3 for age in input().split()))
