class Solution:
    def countPeaks(self, heights: List[int]) -> int:
        return sum(
            heights[i - 1] <= heights[i] >= heights[i + 1] for i in range(1, len(heights) - 1)
        )
