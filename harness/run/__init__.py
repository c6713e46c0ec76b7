"""`appliance run`: the plan (options made concrete once), the cards and their backends' records, the SUT
LoadGen calls, the sample library, the LoadGen settings, run folders, calibration and the runner."""
