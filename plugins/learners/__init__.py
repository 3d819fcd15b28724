"""Private-learning track: learners that release one trained model under a budget."""
