year = int(input())
print("Yes" if year % 4 == 0 else "No")
