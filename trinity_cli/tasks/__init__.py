"""Task sets (HumanEval's fields) and their fixed train/test split."""
