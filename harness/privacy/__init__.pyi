from .accountants import (
    RDP_CONVERSIONS,
    Accountant,
    GDPAccountant,
    Phase,
    PRVAccountant,
    RDPAccountant,
    calibrate,
    calibrate_noise_multiplier,
    make_accountant,
)
from .clipping import (
    LayerGrad,
    MaterializedGrad,
    OuterProductGrad,
    finite_examples,
    opacus_rule,
    prefix_structure,
    register_fast_rule,
    zero_examples,
)
from .dpsgd import DPSGD, PrivatePhase
from .mechanisms import calibrate_gaussian, exponential_mechanism, gaussian_delta, gaussian_epsilon, zcdp_epsilon
from .zcdp import ZcdpLedger, gaussian_rho, gaussian_sigma, selection_epsilon, selection_rho, total_rho
