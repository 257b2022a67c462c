import pandas as pd

df = pd.read_csv("inputs/benchmarks.csv")
df_loads = globals().get("df_loads", 0) + 1  # how often this kernel read the CSV
print(f"loaded {len(df)} models x {len(df.columns)} columns from inputs/benchmarks.csv (load #{df_loads})")
