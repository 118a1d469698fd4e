"""Task sets and the scorers that grade a model's answer against them."""
