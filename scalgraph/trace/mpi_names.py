"""Which regions are MPI routines: by an explicit list of the MPI standard's function names (MPI-4.0,
as declared by MPICH's and Open MPI's mpi.h, large-count `_c` variants included), not by a name
prefix.  Scalasca decides the same way; a user function such as the APART suite's
`mpi_commpattern_sendrecv` is computation.  Fortran and profiling spellings (mpi_send_, PMPI_Send)
map to the C name; the match ignores case, as Fortran names are case-insensitive."""
from __future__ import annotations

import re

_NAMES = frozenset("""
    Abort Accumulate Add_error_class Add_error_code Add_error_string Address Aint_add Aint_diff Allgather 
    Allgatherv Alloc_mem Allreduce Alltoall Alltoallv Alltoallw Attr_delete Attr_get Attr_put Barrier Bcast 
    Bsend Bsend_init Buffer_attach Buffer_detach Cancel Cart_coords Cart_create Cart_get Cart_map Cart_rank 
    Cart_shift Cart_sub Cartdim_get Close_port Comm_accept Comm_c2f Comm_call_errhandler Comm_compare 
    Comm_connect Comm_create Comm_create_errhandler Comm_create_group Comm_create_keyval Comm_delete_attr 
    Comm_disconnect Comm_dup Comm_dup_with_info Comm_f2c Comm_free Comm_free_keyval Comm_get_attr 
    Comm_get_errhandler Comm_get_info Comm_get_name Comm_get_parent Comm_group Comm_idup Comm_join Comm_rank 
    Comm_remote_group Comm_remote_size Comm_set_attr Comm_set_errhandler Comm_set_info Comm_set_name Comm_size 
    Comm_spawn Comm_spawn_multiple Comm_split Comm_split_type Comm_test_inter Compare_and_swap Dims_create 
    Dist_graph_create Dist_graph_create_adjacent Dist_graph_neighbors Dist_graph_neighbors_count Errhandler_c2f 
    Errhandler_create Errhandler_f2c Errhandler_free Errhandler_get Errhandler_set Error_class Error_string 
    Exscan Fetch_and_op File_c2f File_call_errhandler File_close File_create_errhandler File_delete File_f2c 
    File_get_amode File_get_atomicity File_get_byte_offset File_get_errhandler File_get_group File_get_info 
    File_get_position File_get_position_shared File_get_size File_get_type_extent File_get_view File_iread 
    File_iread_all File_iread_at File_iread_at_all File_iread_shared File_iwrite File_iwrite_all File_iwrite_at 
    File_iwrite_at_all File_iwrite_shared File_open File_preallocate File_read File_read_all 
    File_read_all_begin File_read_all_end File_read_at File_read_at_all File_read_at_all_begin 
    File_read_at_all_end File_read_ordered File_read_ordered_begin File_read_ordered_end File_read_shared 
    File_seek File_seek_shared File_set_atomicity File_set_errhandler File_set_info File_set_size File_set_view 
    File_sync File_write File_write_all File_write_all_begin File_write_all_end File_write_at File_write_at_all 
    File_write_at_all_begin File_write_at_all_end File_write_ordered File_write_ordered_begin 
    File_write_ordered_end File_write_shared Finalize Finalized Free_mem Gather Gatherv Get Get_accumulate 
    Get_address Get_count Get_elements Get_elements_x Get_library_version Get_processor_name Get_version 
    Graph_create Graph_get Graph_map Graph_neighbors Graph_neighbors_count Graphdims_get Grequest_complete 
    Grequest_start Group_c2f Group_compare Group_difference Group_excl Group_f2c Group_free Group_incl 
    Group_intersection Group_range_excl Group_range_incl Group_rank Group_size Group_translate_ranks 
    Group_union Iallgather Iallgatherv Iallreduce Ialltoall Ialltoallv Ialltoallw Ibarrier Ibcast Ibsend 
    Iexscan Igather Igatherv Improbe Imrecv Ineighbor_allgather Ineighbor_allgatherv Ineighbor_alltoall 
    Ineighbor_alltoallv Ineighbor_alltoallw Info_c2f Info_create Info_delete Info_dup Info_f2c Info_free 
    Info_get Info_get_nkeys Info_get_nthkey Info_get_valuelen Info_set Init Init_thread Initialized 
    Intercomm_create Intercomm_merge Iprobe Irecv Ireduce Ireduce_scatter Ireduce_scatter_block Irsend 
    Is_thread_main Iscan Iscatter Iscatterv Isend Issend Keyval_create Keyval_free Lookup_name Message_c2f 
    Message_f2c Mprobe Mrecv Neighbor_allgather Neighbor_allgatherv Neighbor_alltoall Neighbor_alltoallv 
    Neighbor_alltoallw Op_c2f Op_commutative Op_create Op_f2c Op_free Open_port Pack Pack_external 
    Pack_external_size Pack_size Pcontrol Probe Publish_name Put Query_thread Raccumulate Recv Recv_init Reduce 
    Reduce_local Reduce_scatter Reduce_scatter_block Register_datarep Request_c2f Request_f2c Request_free 
    Request_get_status Rget Rget_accumulate Rput Rsend Rsend_init Scan Scatter Scatterv Send Send_init Sendrecv 
    Sendrecv_replace Session_c2f Session_f2c Ssend Ssend_init Start Startall Status_c2f Status_f2c 
    Status_set_cancelled Status_set_elements Status_set_elements_x T_category_changed T_category_get_categories 
    T_category_get_cvars T_category_get_index T_category_get_info T_category_get_num T_category_get_pvars 
    T_cvar_get_index T_cvar_get_info T_cvar_get_num T_cvar_handle_alloc T_cvar_handle_free T_cvar_read 
    T_cvar_write T_enum_get_info T_enum_get_item T_finalize T_init_thread T_pvar_get_index T_pvar_get_info 
    T_pvar_get_num T_pvar_handle_alloc T_pvar_handle_free T_pvar_read T_pvar_readreset T_pvar_reset 
    T_pvar_session_create T_pvar_session_free T_pvar_start T_pvar_stop T_pvar_write Test Test_cancelled Testall 
    Testany Testsome Topo_test Type_c2f Type_commit Type_contiguous Type_create_darray Type_create_f90_complex 
    Type_create_f90_integer Type_create_f90_real Type_create_hindexed Type_create_hindexed_block 
    Type_create_hvector Type_create_indexed_block Type_create_keyval Type_create_resized Type_create_struct 
    Type_create_subarray Type_delete_attr Type_dup Type_extent Type_f2c Type_free Type_free_keyval 
    Type_get_attr Type_get_contents Type_get_envelope Type_get_extent Type_get_extent_x Type_get_name 
    Type_get_true_extent Type_get_true_extent_x Type_hindexed Type_hvector Type_indexed Type_lb Type_match_size 
    Type_set_attr Type_set_name Type_size Type_size_x Type_struct Type_ub Type_vector Unpack Unpack_external 
    Unpublish_name Wait Waitall Waitany Waitsome Win_allocate Win_allocate_shared Win_attach Win_c2f 
    Win_call_errhandler Win_complete Win_create Win_create_dynamic Win_create_errhandler Win_create_keyval 
    Win_delete_attr Win_detach Win_f2c Win_fence Win_flush Win_flush_all Win_flush_local Win_flush_local_all 
    Win_free Win_free_keyval Win_get_attr Win_get_errhandler Win_get_group Win_get_info Win_get_name Win_lock 
    Win_lock_all Win_post Win_set_attr Win_set_errhandler Win_set_info Win_set_name Win_shared_query Win_start 
    Win_sync Win_test Win_unlock Win_unlock_all Win_wait Wtick Wtime 
""".split())

MPI_FUNCTIONS = frozenset("MPI_" + n for n in _NAMES)
_LOWER = {n.lower(): n for n in MPI_FUNCTIONS}
_SPELLING = re.compile(r"^p?(mpi_\w*?)(?:_f08ts|_f08)?_*$", re.IGNORECASE)


def mpi_function(name: str) -> str | None:
    """The MPI function a region name stands for (MPI_Send for MPI_Send, PMPI_Send, mpi_send_,
    MPI_SEND), or None for any other name."""
    m = _SPELLING.match(name.strip())
    return _LOWER.get(m.group(1).lower()) if m else None


def is_mpi_name(name: str) -> bool:
    return mpi_function(name) is not None


def is_mpi_region(region) -> bool:
    """A trace region (scalgraph.model.trace.Region) is an MPI routine when its name is one."""
    return mpi_function(region.name) is not None


def canonical_name(name: str) -> str:
    """The C name of an MPI routine's region (MPI_Send for mpi_send_), other names unchanged."""
    return mpi_function(name) or name
