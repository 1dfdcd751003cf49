"""The synthesizers, one module each (registered in :data:`dpstats.synth.SYNTHESIZERS`)."""
