class Solution:
    def balances(self, start: int, moves: List[int]) -> List[int]:
        balance, after = start, []
        for move in moves:
            if balance + move >= 0:
                balance += move
            after.append(balance)
        return after
