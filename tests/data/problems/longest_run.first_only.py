from collections import Counter

s = input().strip()
print(Counter(s).most_common(1)[0][1])
