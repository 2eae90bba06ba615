class Solution:
    def shiftWord(self, word: str, k: int) -> str:
        return "".join(chr((ord(c) - ord("a") + k) % 26 + ord("a")) for c in word)
