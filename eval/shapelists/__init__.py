"""Shape lists: the seeded generators of training and held-out shapes, and subsets."""
