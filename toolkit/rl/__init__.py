"""Learning from reward (book §14.5.7, "面向环境的强化学习"): verifiable rewards, tasks, and GRPO's loss on 2 cores."""
