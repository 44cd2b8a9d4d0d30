"""The advice: predictions for every topology gathered into a verdict with its margin, where it
flips, the families side by side, tuned DDP, what a preset answer assumed, and its rendering. The top
floor of runtime_model: it may import every floor below."""
