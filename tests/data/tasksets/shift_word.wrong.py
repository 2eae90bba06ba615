class Solution:
    def shiftWord(self, word: str, k: int) -> str:
        return "".join(chr(ord(c) + k) for c in word)
