def fare(age: int) -> int:
    if age < 12:
        return 1
    return 2 if age >= 65 else 3


input()
print(sum(fare(int(age)) for age in input().split()))
