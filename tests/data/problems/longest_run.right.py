from itertools import groupby

s = input().strip()
print(max(len(list(group)) for _, group in groupby(s)))
