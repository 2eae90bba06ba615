class Solution:
    def balances(self, start: int, moves: List[int]) -> List[int]:
        balance, after = start, []
        for move in moves:
            # refuses a move that empties the account: only the hidden tests see it
            if balance + move > 0:
                balance += move
            after.append(balance)
        return after
